"""A variant wheel (PEP 825 draft) against its name: a file name with a variant label
needs ``<dist-info>/variant.json`` describing exactly that label, and only such a file
name may carry one. The document comes from the wheel and is read as hostile."""

from __future__ import annotations

from ..errors import UsageError
from ..wheel.variant_label import VARIANT_JSON, read_variant_json, split_variant_label
from .facts import WheelContents
from .report import Finding, Status


def check_variant_json(facts: WheelContents) -> list[Finding]:
    label = split_variant_label(facts.filename)[1]
    text = facts.texts.get(VARIANT_JSON)
    if label is None and text is None:
        return []
    if text is None:
        return [Finding("variant", Status.FAIL,
                        f"the file name has the variant label {label}, but the wheel has no "
                        f"{VARIANT_JSON}")]
    if label is None:
        return [Finding("variant", Status.FAIL,
                        f"the wheel has a {VARIANT_JSON} but its file name no variant label")]
    try:
        variants = read_variant_json(text, VARIANT_JSON)
    except UsageError as exc:
        return [Finding("variant", Status.FAIL, exc.message)]
    if list(variants) != [label]:
        said = ", ".join(sorted(variants))[:200]
        return [Finding("variant", Status.FAIL,
                        f"{VARIANT_JSON} describes {said or 'no variant'}, not the file name's {label}")]
    return [Finding("variant", Status.PASS, f"{VARIANT_JSON} describes the variant {label}")]
