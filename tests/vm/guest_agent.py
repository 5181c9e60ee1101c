"""The command agent inside the VM guest (see vmharness.py): JSON lines on a virtio-serial port.

Requests: ``{"argv": [...], "timeout": s, "background": bool}`` runs a command (its reply: rc,
stdout, stderr, seconds; a background one answers at once with its job id as stdout);
``{"wait": job, "timeout": s}`` waits for a background job; ``{"signal": job, "sig": n}``.
Each request may carry an ``"id"``, which its reply carries back: the host discards a reply
whose id is not the one it waits for (the late reply of a command it stopped waiting for).
On start it sends ``{"ready": true}``. ``serve`` is the loop on any pair of byte streams (the
host's tests run it on a socket pair).
"""

import json
import os
import signal
import subprocess
import tempfile
import time


def port_path() -> str:
    for _ in range(200):
        base = "/sys/class/virtio-ports"
        for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            try:
                with open(os.path.join(base, name, "name")) as f:
                    if f.read().strip() == "cardbench.agent":
                        return "/dev/" + name
            except OSError:
                pass
        time.sleep(0.05)
    raise SystemExit("guest agent: no virtio port named cardbench.agent")


def main() -> None:
    fd = os.open(port_path(), os.O_RDWR)
    serve(os.fdopen(os.dup(fd), "rb", buffering=0), os.fdopen(fd, "wb", buffering=0))


def serve(inp, out, stop_at_eof: bool = False) -> None:
    """Answer the JSON-line requests read from ``inp`` on ``out``. An empty read is waited out
    (on the virtio port it is a host not connected yet), or ends the loop with ``stop_at_eof``
    (a host test's socket pair)."""
    jobs: dict[str, tuple[subprocess.Popen, str, str, float]] = {}

    def send(obj, rid=None) -> None:
        # one write() on the virtio port may take only part of a long reply (a `results --json`):
        # the rest is written until all is out, or the host would wait for a line never ended
        data = memoryview(json.dumps(obj if rid is None else {**obj, "id": rid}).encode() + b"\n")
        while data:
            n = out.write(data)
            if n is None:            # the port is full: let the host read
                time.sleep(0.01)
                continue
            data = data[n:]

    def finish(job: str, timeout: float) -> dict:
        proc, o, e, t0 = jobs.pop(job)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
            rc = -1000 + rc
        with open(o, errors="replace") as fo, open(e, errors="replace") as fe:
            reply = {"rc": rc, "stdout": fo.read(), "stderr": fe.read(), "seconds": time.monotonic() - t0}
        os.unlink(o)
        os.unlink(e)
        return reply

    send({"ready": True})
    buf = b""
    n = 0
    while True:
        chunk = inp.read(65536)
        if chunk is None:            # a non-blocking stream with nothing to read yet
            time.sleep(0.01)
            continue
        if not chunk:
            if stop_at_eof:
                return
            time.sleep(0.05)
            continue
        buf += chunk
        while b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            req = json.loads(line)
            rid = req.get("id")
            if "wait" in req:
                send(finish(req["wait"], req.get("timeout", 300)), rid)
                continue
            if "signal" in req:
                proc = jobs[req["signal"]][0]
                os.killpg(proc.pid, req.get("sig", signal.SIGINT))
                send({"rc": 0, "stdout": "", "stderr": "", "seconds": 0}, rid)
                continue
            n += 1
            job = str(n)
            fo = tempfile.NamedTemporaryFile(delete=False, prefix="agent-out-")
            fe = tempfile.NamedTemporaryFile(delete=False, prefix="agent-err-")
            t0 = time.monotonic()
            try:
                proc = subprocess.Popen(req["argv"], stdout=fo, stderr=fe, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except OSError as e:
                send({"rc": 127, "stdout": "", "stderr": str(e), "seconds": 0}, rid)
                continue
            finally:
                fo.close()
                fe.close()
            jobs[job] = (proc, fo.name, fe.name, t0)
            if req.get("background"):
                send({"rc": 0, "stdout": job, "stderr": "", "seconds": 0}, rid)
            else:
                send(finish(job, req.get("timeout", 300)), rid)


if __name__ == "__main__":
    main()
