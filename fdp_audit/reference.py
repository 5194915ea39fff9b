"""Reference pages generated from the code, so that they cannot drift: the configuration reference from the schema
(:func:`configuration_markdown`), with the names each registry holds for the fields that name registry entries.
A test checks that the pages hold what this module generates."""

from __future__ import annotations


def configuration_markdown() -> str:
    """The configuration reference: every dotted key with its type and default.

    Returns:
        A markdown table; fields that name a registry's entries list the registered names.
    """
    from fdp_audit.config import config_reference_markdown
    from fdp_audit.data.catalog import DATASETS, PUBLIC_MAPS
    from fdp_audit.execution import EXECUTORS

    return config_reference_markdown({"data.dataset": DATASETS, "data.public_map": PUBLIC_MAPS,
                                      "audit.executor": EXECUTORS})
