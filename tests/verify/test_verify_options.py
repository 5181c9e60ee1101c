"""verify's option rules (verify/options.py), on models: which test a target gets, and each refusal
in one line with its exit code, as the command line and the library both say it."""

from __future__ import annotations

import pytest

from cardbench.errors import TargetError, UsageError
from cardbench.target import open_target
from cardbench.verify.options import VerifyOptions, target_kind

MiB = 1 << 20


@pytest.mark.parametrize("kind,opts,mode", [
    ("device", {}, "quick"),
    ("device", {"destructive": True}, "quick"),
    ("device", {"time_budget": 5.0}, "quick"),
    ("device", {"full": True, "destructive": True, "resume": True}, "full"),
    ("directory", {}, "full"),
    ("directory", {"full": True, "resume": True, "keep_files": True, "file_bytes": 8 * MiB}, "full"),
])
def test_allowed(kind, opts, mode):
    assert VerifyOptions(**opts).check(kind, "/x") == mode


@pytest.mark.parametrize("kind,opts,words", [
    ("other", {}, "neither a block device nor a directory"),
    ("directory", {"destructive": True}, "--destructive is for block devices"),
    ("directory", {"time_budget": 5.0}, "--time-budget is for the quick probe"),
    ("device", {"full": True, "destructive": True, "time_budget": 5.0}, "--time-budget is for the quick probe"),
    ("device", {"time_budget": 0.0}, "positive number of seconds"),
    ("device", {"time_budget": -1.0}, "positive number of seconds"),
    ("device", {"resume": True}, "--resume is for full mode"),
    ("device", {"full": True}, "overwrites all of it: add --destructive"),
    ("directory", {"file_bytes": MiB + 512}, "whole number of MiB"),
    ("device", {"full": True, "destructive": True, "file_bytes": 4096}, "whole number of MiB"),
])
def test_refused(kind, opts, words):
    with pytest.raises(UsageError, match=words) as e:
        VerifyOptions(**opts).check(kind, "/x")
    assert e.value.exit_code == 2 and "\n" not in e.value.message


def test_the_target_is_looked_at_once_by_open_target(tmp_path):
    from cardbench.target import open_target, target_model
    assert target_kind(open_target(str(tmp_path))) == "directory"
    (tmp_path / "f").write_bytes(b"x")
    assert target_kind(open_target(str(tmp_path / "f"))) == "other"     # an image file
    with pytest.raises(UsageError, match="neither"):
        VerifyOptions().validate(open_target(str(tmp_path / "f")))
    # the rules need no system: a model of a directory target
    assert VerifyOptions().validate(target_model("directory", free=1 << 30)) == "full"
    # what a missing path is, verify_target says in open_target's one wording (exit 3)
    from cardbench.verify import verify_target
    with pytest.raises(TargetError, match="no such file or directory"):
        verify_target(open_target(str(tmp_path / "missing"), kinds=("directory", "device"), write=True, whole_device=True), VerifyOptions())


def test_the_library_checks_the_same_rules(tmp_path):
    from cardbench.verify.full import verify_full
    from cardbench.verify.quick import verify_device
    with pytest.raises(UsageError, match="whole number of MiB"):
        verify_full(open_target(str(tmp_path), write=True), file_bytes=1000)
    with pytest.raises(UsageError, match="--destructive is for block devices"):
        verify_full(open_target(str(tmp_path), write=True), destructive=True)
    from realparts import loop_device
    with loop_device(16 << 20) as dev, pytest.raises(UsageError, match="positive number of seconds"):
        verify_device(open_target(dev, kinds=("device",), whole_device=True), time_budget=0)


def test_the_command_line_says_it_in_one_line(tmp_path, capsys):
    import signal

    from cardbench.cli import main
    old_term = signal.getsignal(signal.SIGTERM)     # main() installs its own SIGTERM handler
    for argv, code, words in [
        (["verify", str(tmp_path / "missing"), "--no-save"], 3, "no such file"),
        (["verify", str(tmp_path), "--destructive", "--no-save"], 2, "--destructive is for block devices"),
        (["verify", str(tmp_path), "--time-budget", "5", "--no-save"], 2, "--time-budget is for the quick probe"),
    ]:
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        signal.signal(signal.SIGTERM, old_term)
        assert e.value.code == code and words in err and err.count("\n") == 1, (argv, err)
