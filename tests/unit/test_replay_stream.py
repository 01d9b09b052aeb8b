"""Replay streams: the file format round trip, its digest, and a hostile file refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.sample.replay.stream import (
    MAX_REQUEST_BYTES,
    MAX_REQUESTS,
    Kind,
    Request,
    Stream,
    StreamError,
    parse_stream,
)

MIB = 1024 * 1024


def stream() -> Stream:
    return Stream(
        disk_bytes=64 * MIB,
        requests=(
            Request(Kind.READ, 0, 4096),
            Request(Kind.WRITE, 4096, 8192, depth=1),
            Request(Kind.WRITE, 1 * MIB, 65536, zero=True, fua=True, depth=2),
            Request(Kind.WRITE_ZEROES, 2 * MIB, MIB, zero=True),
            Request(Kind.FLUSH),
            Request(Kind.DISCARD, 0, MIB),
        ),
        drive={"format": "qcow2", "cache": "none", "aio": "threads"},
        graph=(("qcow2", "0x22"), ("file", "0x22")),
        source={"cell": "x"},
    )


def doc(**changes: Any) -> dict[str, Any]:
    data = stream().as_dict()
    for key, value in changes.items():
        if key.startswith("requests."):
            data["requests"][key.removeprefix("requests.")] = value
        else:
            data[key] = value
    return data


def test_a_stream_round_trips_through_its_file_and_keeps_its_digest() -> None:
    original = stream()
    back = parse_stream(original.to_json(), source="s.json")
    assert back == original
    assert back.digest == original.digest
    assert len(original.digest) == 64
    # where it was recorded is not part of what it is
    assert Stream(**{**original.__dict__, "source": {"cell": "y"}}).digest == original.digest


def test_counts_and_summary_say_what_two_recordings_are_compared_by() -> None:
    s = stream()
    assert s.counts() == {"read": 1, "write": 2, "write_zeroes": 1, "flush": 1, "discard": 1}
    summary = s.summary()
    assert summary["write_bytes"] == 8192 + 65536 + MIB
    assert summary["zero_writes"] == 2
    assert summary["fua_writes"] == 1
    assert summary["write_sizes"] == {8192: 1, 65536: 1, MIB: 1}
    assert summary["max_depth"] == 2


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": "other"}, "not a replay stream"),
        ({"version": 2}, "stream version 2"),
        ({"disk_bytes": -1}, "disk_bytes"),
        ({"disk_bytes": True}, "disk_bytes"),
        ({"sector_bytes": 1000}, "sector_bytes"),
        ({"requests.kind": "rwwzfx"}, "kind 'x'"),
        ({"requests.offset": [0, 4096]}, "requests.offset must hold one value per request (6)"),
        ({"requests.offset": [64 * MIB, 4096, MIB, 2 * MIB, 0, 0]}, "request 0 offset"),
        ({"requests.offset": [0, 4097, MIB, 2 * MIB, 0, 0]}, "not aligned to 512 bytes"),
        (
            {
                "requests.offset": [0, 4096, MIB, 2 * MIB, 0, 63 * MIB],
                "requests.bytes": [4096, 8192, 65536, MIB, 0, 2 * MIB],
            },
            "past the disk",
        ),
        ({"requests.bytes": [MAX_REQUEST_BYTES + 512, 8192, 65536, MIB, 0, MIB]}, "request 0 bytes"),
        ({"requests.bytes": [0, 8192, 65536, MIB, 0, MIB]}, "request 0 bytes"),
        ({"requests.bytes": [4096, 8192, 65536, MIB, 512, MIB]}, "request 4 bytes"),
        ({"requests.depth": [0, 1, 2, 0, 0, 99999]}, "request 5 depth"),
        ({"requests.zero": [0, 0, 2, 0, 0, 0]}, "request 2 zero"),
        ({"requests.fua": [0, 0, "1", 0, 0, 0]}, "request 2 fua"),
        ({"drive": {"format": "qcow2,file=/etc/shadow"}}, "letters, digits"),
        ({"drive": []}, "drive must be an object"),
        ({"graph": [["qcow2"]]}, "[driver, flags]"),
        ({"requests": []}, "requests must be an object"),
    ],
)
def test_a_hostile_stream_is_refused_naming_the_file_and_the_field(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(StreamError, match=r"^evil\.json: ") as caught:
        parse_stream(json.dumps(doc(**changes)), source="evil.json")
    assert message in caught.value.message


def test_a_stream_past_the_request_bound_is_refused_before_its_columns_are_read() -> None:
    many = MAX_REQUESTS + 1
    data = doc(**{"requests.kind": "f" * many})
    with pytest.raises(StreamError, match=f"{many} requests, past the {MAX_REQUESTS}"):
        parse_stream(json.dumps(data), source="big.json")


@pytest.mark.parametrize("text", ["", "{", "[1]", '{"format": NaN}', "[" * 100_000])
def test_text_that_is_not_a_stream_is_a_stream_error(text: str) -> None:
    with pytest.raises(StreamError, match=r"^t\.json: "):
        parse_stream(text, source="t.json")


def test_an_oversized_file_is_refused_unread() -> None:
    with pytest.raises(StreamError, match="past the"):
        parse_stream(" " * (9 * MIB), source="huge.json")
