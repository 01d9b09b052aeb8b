"""A sample as a record stores it: the guest's and the logs' text made inert."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.record.model import Sample
from harness.untrusted import LOG_TAIL_CHARS, clean_json, clean_line, clean_text


def clean_sample(sample: Sample) -> Sample:
    """A sample as a record stores it: every string cleaned (:mod:`harness.untrusted`), reason one
    line, log tail capped."""

    def text(value: str | None) -> str | None:
        return clean_text(value) if isinstance(value, str) else value

    def part(value: Any) -> Any:
        # the sample's own fields are one level down its JSON object
        return clean_json(value, depth=1) if value is not None else None

    return replace(
        sample,
        status=clean_text(sample.status),
        metrics=part(sample.metrics),
        host=part(sample.host),
        logs=part(sample.logs),
        reason=clean_line(sample.reason) if isinstance(sample.reason, str) else None,
        error_type=text(sample.error_type),
        log_tail=(
            clean_text(sample.log_tail, max_chars=LOG_TAIL_CHARS, keep="tail")
            if isinstance(sample.log_tail, str)
            else None
        ),
        warning=text(sample.warning),
        started_at=text(sample.started_at),
        measure=text(sample.measure),
        argv=part(sample.argv),
        guest_ready=part(sample.guest_ready),
        report=part(sample.report),
        replay=part(sample.replay),
        details=clean_json(dict(sample.details)),
    )
