"""Real parts for tests: loop devices, filesystems and the CLI in a child process, always cleaned up.

A module with a unique name (not conftest) so test directories can import it without clashing."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.geteuid() == 0


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


@contextlib.contextmanager
def loop_device(size: int, directory: str | None = None, direct_io: bool = False):
    """A loop device over a sparse file; detached and removed afterwards, whatever happens."""
    d = tempfile.mkdtemp(prefix="cardbench-test-loop-", dir=directory)
    img = os.path.join(d, "disk.img")
    with open(img, "wb") as f:
        f.truncate(size)
    dev = None
    try:
        args = ["losetup", "-f", "--show"] + (["--direct-io=on"] if direct_io else []) + [img]
        dev = sh(*args).stdout.strip()
        yield dev
    finally:
        if dev:
            sh("losetup", "-d", dev, check=False)
        os.unlink(img)
        os.rmdir(d)


@contextlib.contextmanager
def mounted(dev: str, fstype: str = "ext4", options: str | None = None):
    """mkfs + mount in a temporary directory; unmounted afterwards, whatever happens."""
    mkfs = {"ext4": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]}[fstype]
    sh(*mkfs, dev)
    mnt = tempfile.mkdtemp(prefix="cardbench-test-mnt-")
    mounted_ok = False
    try:
        sh("mount", *(["-o", options] if options else []), dev, mnt)
        mounted_ok = True
        yield mnt
    finally:
        if mounted_ok:
            if sh("umount", mnt, check=False).returncode != 0:
                sh("umount", "-l", mnt, check=False)
        os.rmdir(mnt)



def child_env() -> dict[str, str]:
    """The environment of a child Python: the same cardbench as the tests (this checkout's src/,
    not an installed one)."""
    env = dict(os.environ)
    env.pop("CARDBENCH_DEBUG", None)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_cli(*args: str, input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real command line in a child process (as a user would)."""
    env = child_env()
    return subprocess.run([sys.executable, "-m", "cardbench", *args], capture_output=True, text=True,
                          input=input, timeout=timeout, env=env)


def call_cli(*args: str, input: str | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """The real ``cardbench.cli.main(argv)`` in this process, for tests about what a command decides
    or prints (no signal, terminal, other user or second process under test): about a millisecond
    instead of run_cli's half second. Same return shape as :func:`run_cli` (returncode, stdout,
    stderr); stdin is ``input`` (or empty, not a terminal), stdout and stderr are not terminals.

    What a command may change in the process is put back afterwards, whatever happens: os.environ,
    the working directory, the umask, the SIGINT/SIGTERM/SIGHUP handlers (main installs its
    SIGTERM handler) and the blocked-signal mask, the root logger's handlers and level, and
    sys.stdin/stdout/stderr and sys.argv. ``timeout`` is accepted for a one-word change from
    run_cli and ignored: an in-process command cannot be killed (use run_cli where one may hang)."""
    import io
    import logging
    import signal

    from cardbench.cli import main
    del timeout
    env = dict(os.environ)
    cwd = os.getcwd()
    umask = os.umask(0o022)
    os.umask(umask)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    root = logging.getLogger()
    log_state = (list(root.handlers), root.level)
    streams = (sys.stdin, sys.stdout, sys.stderr, list(sys.argv))

    class Kept(io.BytesIO):
        def close(self) -> None:      # a command closing its stdout must not lose what it wrote
            pass

    def text(buffer: io.BytesIO) -> io.TextIOWrapper:   # with .buffer, for bytes, as a real stream
        return io.TextIOWrapper(buffer, encoding="utf-8", errors="backslashreplace", write_through=True)

    out_b, err_b = Kept(), Kept()
    out, err = text(out_b), text(err_b)
    os.environ.pop("CARDBENCH_DEBUG", None)     # as run_cli: the user-facing one-line errors
    code: int | None = None
    try:
        sys.stdin, sys.stdout, sys.stderr = text(Kept((input or "").encode())), out, err
        sys.argv = ["cardbench", *args]
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                err.write(f"{e.code}\n")      # sys.exit("message") prints it, as a process would
    finally:
        for stream in (out, err):
            try:
                stream.flush()
            except ValueError:        # closed by the command: its bytes are in the buffer
                pass
        sys.stdin, sys.stdout, sys.stderr, sys.argv = streams
        root.handlers[:], root.level = log_state
        for s, h in handlers.items():
            signal.signal(s, h)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.umask(umask)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
    def value(buffer: io.BytesIO) -> str:   # as subprocess.run(text=True) reads a pipe
        return buffer.getvalue().decode("utf-8", "replace").replace("\r\n", "\n")
    return subprocess.CompletedProcess(["cardbench", *args], code, value(out_b), value(err_b))


def sha256_device(dev: str, card=None) -> str:
    """sha256 of a whole device, page cache dropped first; read unpaced when ``card`` (an emulated
    card) is given, so a slow card is hashed quickly."""
    def read() -> str:
        h = hashlib.sha256()
        fd = os.open(dev, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while True:
                b = os.read(fd, 8 << 20)
                if not b:
                    break
                h.update(b)
        finally:
            os.close(fd)
        return h.hexdigest()
    if card is None:
        return read()
    with card.unpaced():
        return read()


def emulator_leftovers(prefix: str | os.PathLike) -> list[str]:
    """Loop devices, mounts and emulator server processes under ``prefix`` (ours only: others may
    run their own emulators on this machine at the same time)."""
    from cardbench.emulate import system
    prefix = os.path.realpath(prefix).rstrip("/") + "/"
    found = [f"loop {lo.device} -> {lo.backing_file}" for lo in system.loops()
             if lo.backing_file.startswith(prefix)]
    found += [f"mount {m.mountpoint} ({m.fstype})" for m in system.mounts()
              if (m.mountpoint + "/").startswith(prefix)]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"cardbench.emulate.server" in args and any(a.startswith(os.fsencode(prefix)) for a in args) \
                and system.process_alive(int(pid)):
            found.append(f"server process {pid}")
    return found


def can_emulate() -> bool:
    """Root, FUSE, loop devices and libfuse3: what emulated cards need."""
    import shutil
    if not ROOT or not os.path.exists("/dev/fuse") or not shutil.which("losetup"):
        return False
    try:
        from cardbench.emulate import check_environment
        check_environment()
    except Exception:  # noqa: BLE001 - any reason means: skip
        return False
    return True


@contextlib.contextmanager
def emulators_under(directory: str | os.PathLike):
    """Emulators started inside live under ``directory`` ($CARDBENCH_EMULATE_TMPDIR); afterwards
    none of theirs may be left (loop devices, mounts, server processes)."""
    old = os.environ.get("CARDBENCH_EMULATE_TMPDIR")
    os.environ["CARDBENCH_EMULATE_TMPDIR"] = str(directory)
    try:
        yield directory
    finally:
        if old is None:
            os.environ.pop("CARDBENCH_EMULATE_TMPDIR", None)
        else:
            os.environ["CARDBENCH_EMULATE_TMPDIR"] = old
    assert emulator_leftovers(directory) == [], "emulator leftovers (loop devices, mounts or servers)"


@contextlib.contextmanager
def unprivileged_user():
    """A fresh desktop-like user (unique name, own home under the temp dir), removed afterwards
    whatever happens. Yields (name, uid, gid, home)."""
    import pwd
    import uuid
    name = f"cbt{uuid.uuid4().hex[:10]}"
    home = tempfile.mkdtemp(prefix=f"cardbench-test-home-{name}-")
    os.chmod(home, 0o755)
    created = False
    try:
        sh("useradd", "--no-create-home", "--home-dir", home, "--shell", "/bin/sh", "--user-group", name)
        created = True
        pw = pwd.getpwnam(name)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        yield name, pw.pw_uid, pw.pw_gid, home
    finally:
        if created:
            # the user's processes end with the commands (run_cli_as waits); userdel refuses a
            # user with processes, so say it rather than leave the account
            r = sh("userdel", name, check=False)
            assert r.returncode == 0, f"userdel {name}: {r.stderr}"
        sh("rm", "-rf", "--one-file-system", home, check=False)


#: Runs one command as another user, in a private mount namespace where /root is a fresh,
#: traversable tmpfs holding only a bind of the interpreter's tree. Why: this machine's Python
#: (and a CI machine's) lives under /root/.pyenv and /root is 0700, so another user cannot run
#: it; its libpython is found through an absolute RPATH under /root, so a bind elsewhere would
#: not do. The namespace changes nothing outside it (no permission of /root is touched) and
#: vanishes with its last process, also when the test is killed.
_AS_USER = r'''
set -e
mount -t tmpfs -o mode=0700 cardbench-test-stash /mnt
stash=/mnt/stash
mkdir "$stash"
mount --bind "$CB_PYROOT" "$stash"
mount -t tmpfs -o mode=0755 cardbench-test-root /root
mkdir -p "$CB_PYROOT"
mount --bind "$stash" "$CB_PYROOT"
cd /
exec runuser -u "$CB_USER" -- env -i HOME="$CB_HOME" USER="$CB_USER" LOGNAME="$CB_USER" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 PYTHONPATH="$CB_SRC" "$CB_PYTHON" -m cardbench "$@"
'''


def run_cli_as(user: str, home: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real command line as ``user`` (see _AS_USER), this checkout's src/ first on the path."""
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    py = os.path.realpath(sys.executable)
    pyroot = sys.base_prefix if os.path.realpath(sys.base_prefix).startswith("/root/") else None
    env = dict(os.environ, CB_USER=user, CB_HOME=home, CB_SRC=src, CB_PYTHON=py, CB_PYROOT=pyroot or "/nonexistent")
    if pyroot is None:   # the interpreter is not under /root: run it as it is
        script = ('exec runuser -u "$CB_USER" -- env -i HOME="$CB_HOME" PATH=/usr/sbin:/usr/bin:/sbin:/bin '
                  'LANG=C.UTF-8 PYTHONPATH="$CB_SRC" "$CB_PYTHON" -m cardbench "$@"')
        cmd = ["sh", "-c", script, "sh", *args]
    else:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _AS_USER, "sh", *args]
    # its own session: runuser forks the command, so a timeout must end the whole group (seen: a
    # drawer left running as a test user for half an hour, and the user never removed)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        import signal
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def stop_process(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP ``pid`` and return once it is stopped. kill() only queues the stop: on a busy
    machine one of an emulator server's threads still answered after it (seen: a liveness ping
    answered, so a teardown waited on the stopped server for good and the suite hung; a probe
    meant to stall opened the card at once)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as f:
            state = next(line for line in f if line.startswith("State:"))
        if "\tT" in state:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop: {state.strip()}")
