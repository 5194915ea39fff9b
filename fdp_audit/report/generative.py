"""The report section of a generative experiment (results.json ``generative``; docs/generative.md): the Fréchet
distance of every training mechanism over seeds, its wall time, the per-class distances, the audit verdicts, and a
grid of samples beside the numbers.

Sample grids are drawn from the stored grey levels as vector graphics — one path per grey level, one unit square
per pixel — so the report stays a self-contained page with no embedded raster image.
"""

from __future__ import annotations

from collections import defaultdict

from markupsafe import Markup, escape

from fdp_audit.report import texts
from fdp_audit.report.format import number
from fdp_audit.report.model import Cell, FigureView, Node, Section, Table, num, scalar, status, text, threat_cell
from fdp_audit.report.svg import inline_svg

GREY_LEVELS = 32  # grey levels of a drawn sample (the stored 0–255 values are rounded to these)
_GAP = 1  # pixels between two samples of a grid


def _mean_sd(node: Node) -> Cell:
    mean, sd = node["mean"].number(), node["sd"].number()
    return Cell(f"{number(mean)} ± {number(sd)}", {node["mean"].pointer: mean, node["sd"].pointer: sd}, "num")


def _range(node: Node) -> Cell:
    low, high = node["min"].number(), node["max"].number()
    return Cell(f"{number(low)} – {number(high)}", {node["min"].pointer: low, node["max"].pointer: high}, "num")


def grid_svg(rows: Node, height: int, width: int, label: str) -> str:
    """An SVG of the samples ``rows[class][sample][pixel]`` (grey levels 0–255, row-major ``height × width``):
    one row of samples per class.

    Args:
        rows: the stored samples, one list per class.
        height: the images' height in pixels.
        width: the images' width in pixels.
        label: the figure's title.

    Returns:
        A standalone SVG document.

    Raises:
        BadInputError: a sample is not ``height × width`` integers in 0–255.
    """
    return panels_svg([list(samples.elements()) for samples in rows.elements()], height, width, label)


def panels_svg(rows: list[list[Node]], height: int, width: int, label: str,
               frames: dict[tuple[int, int], str] | None = None, target_width: int = 240) -> str:
    """An SVG of grey-level images in rows of panels, ``rows[r][c]`` the pixels of one (grey levels 0–255,
    row-major ``height × width``), the panels ``frames`` names framed in its colour, scaled to about
    ``target_width`` pixels.

    Args:
        rows: the stored pixel lists, one list of panels per row.
        height: the images' height in pixels.
        width: the images' width in pixels.
        label: the figure's title.
        frames: ``(row, column)`` → CSS colour of a panel's frame; None frames nothing.
        target_width: the drawing's approximate width in screen pixels (an integer scale, at least 1).

    Returns:
        A standalone SVG document.

    Raises:
        BadInputError: a panel is not ``height × width`` integers in 0–255.
    """
    paths: dict[int, list[str]] = defaultdict(list)
    n_columns = max((len(panels) for panels in rows), default=0)
    for r, panels in enumerate(rows):
        for c, pixels in enumerate(panels):
            values = pixels.sequence()
            if len(values) != height * width or not all(isinstance(v, int) and 0 <= v <= 255 for v in values):
                raise pixels.bad(f"expected {height * width} grey levels 0–255")
            top, left = r * (height + _GAP), c * (width + _GAP)
            for i, value in enumerate(values):
                level = round(value * (GREY_LEVELS - 1) / 255)
                paths[level].append(f"M{left + i % width} {top + i // width}h1v1h-1z")
    full_width, full_height = max(n_columns * (width + _GAP) - _GAP, 1), max(len(rows) * (height + _GAP) - _GAP, 1)
    greys = {level: round(level * 255 / (GREY_LEVELS - 1)) for level in paths}
    body = "".join(f'<path fill="#{greys[level]:02x}{greys[level]:02x}{greys[level]:02x}" d="{"".join(parts)}"/>'
                   for level, parts in sorted(paths.items()))
    # a frame on the gap around its panel, half a pixel wide, so that it hides none of the image
    body += "".join(f'<rect x="{c * (width + _GAP) - 0.25}" y="{r * (height + _GAP) - 0.25}" width="{width + 0.5}" '
                    f'height="{height + 0.5}" fill="none" stroke="{colour}" stroke-width="0.5"/>'
                    for (r, c), colour in (frames or {}).items())
    # half a pixel of margin all round, where the frames of the outer panels lie
    outer_width, outer_height = full_width + 1, full_height + 1
    scale = max(1, target_width // outer_width)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{outer_width * scale}" height="{outer_height * scale}" '
            f'viewBox="-0.5 -0.5 {outer_width} {outer_height}" shape-rendering="crispEdges">'
            f'<title>{escape(label)}</title>'
            f'<rect x="-0.5" y="-0.5" width="{outer_width}" height="{outer_height}" fill="#ffffff"/>{body}</svg>')


def generative_section(node: Node) -> Section:
    """The generative-model section: sample quality (Fréchet distances per mechanism and class), the ordering the
    paper reports, the one-run audits of the training step, and the sample grids.

    Args:
        node: results' ``generative`` section.

    Returns:
        The section.

    Raises:
        BadInputError: the section breaks the contract.
    """
    section = Section("generative", "Generative model: sample quality and audit", texts.GENERATIVE)
    for key, label in (("dataset", "data"), ("public_feature", "public feature Ψ"), ("epsilon", "ε (private ones)"),
                       ("delta", "δ"), ("seeds", "seeds"), ("denoiser_parameters", "denoiser parameters"),
                       ("sample_rate", "sample rate p"), ("classifier_accuracy", "feature classifier test accuracy"),
                       ("ordering_holds", "paper's ordering reproduced")):
        child = node.present(key)
        if child is not None:
            section.facts.append((label, scalar(child) or Cell("—")))
    variants = list(node["variants"].elements())
    rows = [[text(v["label"]), _mean_sd(v["distance"]), _range(v["distance"]),
             num(v["noise_multiplier"], nullable=True), _mean_sd(v["train_seconds"]), _mean_sd(v["sample_seconds"]),
             num(v["paper_fid"])] for v in variants]
    section.tables.append(Table("generative-table", ("Mechanism", "Fréchet distance (mean ± sd over seeds)",
                                                     "min – max", "noise multiplier z", "training s", "sampling s",
                                                     "paper's FID (AFHQ)"), rows,
                                caption="Lower is better. Distances in the feature space of the suite's own "
                                        "classifier: not comparable with Inception FID."))
    reference = node.present("reference")
    if reference is not None:
        section.facts.append(("real training images (the estimator's floor)", _mean_sd(reference["real_train"])))
        section.facts.append(("public completions Ψ̃(x) themselves", num(reference["public_completions"])))
    ordering = node.present("ordering")
    if ordering is not None:
        section.tables.append(Table("generative-ordering", ("Comparison of means", "Holds"),
                                    [[Cell(name), scalar(value) or Cell("—")] for name, value in ordering.items()]))
    classes = [key for key, _ in variants[0]["per_class_mean"].items()] if variants else []
    section.tables.append(Table("generative-per-class", ("Mechanism", *(f"class {c}" for c in classes)),
                                [[text(v["label"]), *(num(v["per_class_mean"][c]) for c in classes)] for v in variants],
                                caption="Per-class Fréchet distance, mean over seeds.", collapsed=True))
    audits = node.present("audits")
    if audits is not None:
        section.tables.append(Table("generative-audit", ("Mechanism", "Verdict", "Claimed ε", "Best guesses",
                                                         "Correct", "Threat model"),
                                    [[text(a["mechanism"]), status(a["status"]), num(a["claimed_epsilon"]),
                                      num(a["best"]["guesses"]), num(a["best"]["correct"]),
                                      threat_cell(a["best"]["threat_model"])] for a in audits.elements()],
                                    caption="One-run audit of the training step with gradient canaries (image game, "
                                            "K candidate residuals sharing a public image)."))
    shape = node["image_shape"].sequence()
    height, width = int(shape[-2]), int(shape[-1])
    grids = node.present("grids")
    for v in variants:
        name = v["mechanism"].text()
        grid = grids.get(name) if grids is not None else None
        if grid is None:
            continue
        label = f"samples: {v['label'].text()}"
        figure_id = f"fig-generative-{name}"
        markup: Markup = inline_svg(grid_svg(grid, height, width, label), figure_id, label)
        section.figures.append(FigureView(figure_id, markup, f"{label} (one row per class, seed 0)"))
    return section
