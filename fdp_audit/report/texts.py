"""Plain-language help of the report (docs/files.md): for each section, what is measured (and under which
threat model), then how to read it. Kept apart from the layout so reviewers can edit the wording."""

from __future__ import annotations

from typing import NamedTuple


class Help(NamedTuple):
    """The plain-language help of one kind of report section.

    Attributes:
        measured: what is measured, and under which threat model.
        reading: how to read it.
    """

    measured: str
    reading: str


VERDICT = Help(
    "Every attack's success is compared with what the claimed guarantee allows: the gate takes the one-sided "
    "lower confidence bound of the success rate (level 1 − α, Bonferroni-corrected over all comparisons) and "
    "checks it against the Theorem 4 bound 1 − f(Ball).",
    "PASS: no attack provably beats its bound. VIOLATION: at least one does, so the implementation or its "
    "privacy accounting leaks more than claimed. The margin is the lower confidence bound minus the bound "
    "(or ε lower bound minus claimed ε); positive is a violation.",
)
FAULTY = (
    "This run audits a known-faulty test mechanism: it is broken on purpose (its accounting claims more privacy "
    "than it gives) so that the audit can be seen to catch it; a VIOLATION is the expected outcome. Never "
    "ship a model trained with it."
)
MECHANISM = Help(
    "The training mechanism and the privacy parameters its accounting uses.",
    "z is the noise multiplier, p the Poisson sampling rate, T the number of noisy steps and C the clip norm of "
    "the private gradient; the public loss sees only the public features Ψ(x) and costs no privacy.",
)
ACCOUNTING = Help(
    "What the privacy parameters buy: ε at several δ from the privacy-loss distribution (PLD, the number the "
    "audit uses), with Rényi DP shown only for comparison, and the whole trade-off curve f.",
    "The plot shows 1 − f(α), the best true-positive rate any test achieves at false-positive rate α; each "
    "empirical point (with its interval) must lie on or below the PLD curve of its own neighbour relation "
    "(add/remove, or replacement for a game that audits replace-one). The GDP approximation is drawn "
    "for comparison only: it understates leakage at small α and is never used to judge.",
)
ATTRIBUTE = Help(
    "Threat model: the adversary knows every other record and the target's public features Ψ(x), sees the "
    "trained model (or its updates), and guesses the protected attribute. FDP bounds this attribute inference "
    "by 1 − f(Ball), where Ball is the best guess from the prior alone; it does not bound membership "
    "inference, because Ψ(x) may identify the record.",
    "Rate is the empirical success with its Clopper–Pearson interval; the gate uses the lower confidence bound. "
    "Tightness = (rate − Ball) / (bound − Ball) is the share of the advantage allowed by Theorem 4 that the "
    "attack realises (1 would make the bound exact).",
)
SWEEP = Help(
    "The same attribute-inference game run on models trained at several ε.",
    "Success should grow with ε but stay under the bound line; the dashed prior line is what guessing without "
    "the model achieves.",
)
RECONSTRUCTION = Help(
    "Threat model: an informed adversary who knows every other record and Ψ(x) reconstructs the continuous "
    "protected features; it succeeds when its guess lies within distance ρ of the truth.",
    "Theorem 4 bounds the success at each ρ by 1 − f(Ball(ρ)), where Ball(ρ) is the best success from the "
    "prior alone; points above the bound line with their whole interval would be a violation.",
)
DISTINGUISHING = Help(
    "A hidden bit chooses one of two neighbouring training sets (same public features Ψ(x), different protected "
    "part); the attack scores the output and guesses the bit. Its error rates give an empirical trade-off.",
    "The ROC curve should stay under the claimed curve. The ε lower bound, computed from the upper confidence "
    "bounds of the error rates, must not exceed the claimed ε; their ratio shows how tight the accounting is.",
)
TIGHTNESS = Help(
    "How much of the leakage the guarantee allows the strongest attack actually realises.",
    "Attack advantage share is (rate − Ball) / (bound − Ball) for the attack; the Theorem 4 tightness is the "
    "same share for the Bayes-optimal adversary (below 1 under Poisson sampling); the simulator ratio is the "
    "ε lower bound over the claimed ε.",
)
CHECKPOINT = Help(
    "Attacks on the real training records' protected attributes of a trained checkpoint, with Pr[v | Ψ(x)] "
    "estimated on a disjoint population split.",
    "Informational only: Ball and the bound are estimates, so this section never fails the gate; the game "
    "audit above is the rigorous test.",
)
PROFILE = Help(
    "Privacy profiles: how much each record's presence changes the output distribution, ranked over records, "
    "and the ε range over which noise actually buys privacy.",
    "Below ε_low more noise buys no further coverage; above ε_high there is effectively no privacy; between "
    "them is the transition. For DP-SGD and FDP-SGD (no known output density) the losses are Monte Carlo "
    "estimates over trained models, shown with their cutoff radius, sample counts and standard errors.",
)
CORRDP = Help(
    "CorrDP accounts for correlation between sensitive and insensitive features: neighbours differ in one kind "
    "only, and an insensitive change costs ε scaled by its total-variation correlation with the sensitive ones.",
    "The realised (ε, δ) from exact accounting is shown beside the nominal value because the paper's noise "
    "calibration is only approximate.",
)
UTILITY = Help(
    "What the privacy costs: the model metric for the private mechanism, a public-only model (trained on Ψ(x) "
    "alone, no privacy cost) and a non-private model.",
    "Useful private training lands between public-only (the floor) and non-private (the ceiling).",
)
GENERATIVE = Help(
    "A class-conditional diffusion model trained five ways (non-private; public-only on the public completions "
    "Ψ̃(x); DP-SGD; FDP by DP-SGD fine-tuning of the public model, Proposition 2; FDP by Algorithm 1), each at the "
    "same ε for the private ones. Sample quality is the Fréchet distance between the features of generated and "
    "held-out real images, in the feature space of a small classifier trained on the same data.",
    "Lower is better. The distances rank these models on this data only: they are not Inception FID values and "
    "cannot be compared with the paper's. The floor row is what real images score at the same sample size. The "
    "audit trains once more with gradient canaries and tests the guesses against the claimed trade-off curve.",
)
REPRODUCIBILITY = Help(
    "Everything needed to rerun this audit: package versions, seed, configuration, dataset fingerprint and "
    "command line.",
    "Rerunning the command with the same versions and data fingerprint reproduces these results.",
)

IMAGE_EXAMPLES_CAPTION = (
    "Example trials, one per row: the public image Ψ(x), the K candidates sharing it (the secret framed in orange), "
    "then each attack's pick ({attacks}; framed green when right, red when wrong). One grey scale for every image "
    "of the game; each pixel drawn as a square."
)
OTHER_GAME = Help(
    "A game this version of the report has no dedicated layout for; its stored facts and attack rows are shown "
    "as recorded.",
    "Its comparisons are judged by the gate like every other and appear in the summary chart above.",
)
BASELINE = Help(
    "How each comparison moved since an earlier audit (typically the main branch's last results): its margin "
    "and ε lower bound then and now, and how much its attack's success rate rose at least.",
    "The rise is the lower confidence bound of (rate now − rate before), at overall level α over all matched "
    "success rates: a positive rise is a statistically significant strengthening of the attack, a sign that "
    "the training now leaks more. Margins and ε lower bounds move with chance too and are shown, not judged.",
)
