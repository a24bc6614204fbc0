"""The results file and the protocol manifest read and write through one helper (``_jsonio``): the exact
one-line errors users see and the exact bytes written are pinned here, for both files."""

from __future__ import annotations

import json

import pytest

from research.evaluation import _jsonio
from research.evaluation.paired import ResultsError, RunResults, TaskResult
from research.evaluation.protocol import (
    ProtocolConfig,
    ProtocolError,
    load_protocol,
    make_protocol,
    write_protocol,
)

from .test_protocol import pool

RUN = RunResults("full-s0", "test_seen", [TaskResult("t1", 0, "correct", True, True, None, 1.5, None)], "ab")


# (loader, error class, missing-file message, kind word, schema) of both files
CASES = [
    (RunResults.load, ResultsError, "no results file at", "file", "study-results/1"),
    (load_protocol, ProtocolError, "no protocol at", "manifest", "study-protocol/1"),
]


def test_read_errors_are_the_same_single_lines(tmp_path):
    for load, err, missing, kind, schema in CASES:
        gone = tmp_path / "gone.json"
        with pytest.raises(err) as exc:
            load(gone)
        assert str(exc.value) == f"{missing} {gone}" and exc.value.__suppress_context__
        bad = tmp_path / "bad.json"
        bad.write_text('{"a":\n')
        with pytest.raises(err) as exc:
            load(bad)
        want = json.JSONDecodeError("Expecting value", '{"a":\n', 6)
        assert str(exc.value) == f"{bad}: not JSON ({want.msg} at line {want.lineno})"
        assert exc.value.__suppress_context__
        for body in ("[1, 2]", json.dumps({"schema": "other/1"}), "{}"):
            bad.write_text(body)
            with pytest.raises(err) as exc:
                load(bad)
            assert str(exc.value) == f"{bad}: not a {schema} {kind}"


def test_written_bytes_and_no_tmp_left(tmp_path):
    path = tmp_path / "deep" / "r.json"
    RUN.save(path)
    assert path.read_text() == json.dumps(RUN.to_dict(), indent=1)
    assert RunResults.load(path) == RUN
    p = make_protocol(pool(), ProtocolConfig(seed=3, heldout_category="reduction"))
    ppath = tmp_path / "deep2" / "protocol.json"
    write_protocol(p, ppath)
    assert ppath.read_text() == json.dumps(p.manifest(), indent=1, sort_keys=True)
    assert load_protocol(ppath).sha256 == p.sha256
    assert sorted(x.name for x in path.parent.iterdir()) == ["r.json"]
    assert sorted(x.name for x in ppath.parent.iterdir()) == ["protocol.json", "protocol.json.lock"]


def test_atomic_write_keeps_the_old_file_when_serialising_fails(tmp_path):
    path = tmp_path / "x.json"
    _jsonio.write_json(path, {"a": 1}, indent=1)
    with pytest.raises(TypeError):
        _jsonio.write_json(path, {"a": object()}, indent=1)
    assert json.loads(path.read_text()) == {"a": 1}
