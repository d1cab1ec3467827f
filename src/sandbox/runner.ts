/**
 * The Python program every sandboxed execution starts with (`python3 -c RUNNER_SOURCE`).
 *
 * Process shape: a trusted supervisor and an untrusted worker.
 *   supervisor  reads the payload from fd 3 (program, limits; never the asserts), checks the
 *               program's syntax (tests mode), marks itself non-dumpable, forks the worker, and only
 *               then reads the asserts from fd 5. It splits them (runner-judge.ts), sends the worker
 *               the calls to make over a pipe, reads the worker's frames from another pipe, judges
 *               them, and writes the verdicts on fd 4. Under a pid namespace it is (or is the child
 *               of) pid 1, so its exit kills every process the user code left behind; without one
 *               it is a child subreaper and kills the leftovers itself.
 *   worker      closes fds 4 and 5 before anything else, applies the rlimits, drops to the sandbox
 *               uid, optionally blocks sockets, and runs one mode (runner-worker.ts).
 * Model code therefore never holds the verdict channel or the expected values: as root it runs
 * under another uid than the supervisor; otherwise the supervisor is non-dumpable, so /proc and
 * ptrace of it are closed to the same uid.
 *
 * Verdict events on fd 4 (field `t`), the protocol parsed by python-sandbox.ts:
 *   {t:'syntax', i?, issue: null | {line, col, message}}
 *   {t:'load', type, message}       program raised while loading (tests mode)
 *   {t:'loaded'}                    program loaded; test events follow
 *   {t:'test', i, passed, errorType?, message?, timedOut?, lowTrust?}
 *   {t:'skip', from}                maxTimeouts reached; tests from index `from` were not run
 *   {t:'memory'}                    a MemoryError (RLIMIT_AS) stopped the worker
 *   {t:'done'}                      the mode finished normally
 *   {t:'fatal', message}            the worker could not confine itself (nothing user-written ran)
 *   {t:'exit', code, signal, cpuSeconds}   after the worker ended
 *
 * Kept as a TS string (not a .py file) so it ships inside the compiled package.
 * It must not contain a backtick or a dollar-brace.
 */
import { JUDGE_SOURCE } from './runner-judge.js';
import { WORKER_SOURCE } from './runner-worker.js';

const PRELUDE = String.raw`
import ast, builtins, json, math, os, re, resource, select, signal, sys, traceback

PAYLOAD_FD, RESULT_FD, TRUSTED_FD = 3, 4, 5


def parse_issue(source):
    try:
        ast.parse(source)
        return None
    except SyntaxError as error:
        return {"line": error.lineno or 0, "col": error.offset or 0, "message": describe(error.msg)}
    except (ValueError, MemoryError, RecursionError) as error:
        return {"line": 0, "col": 0, "message": type(error).__name__ + ": " + describe(error)}
`;

const SUPERVISOR = String.raw`
# ---------------------------------------------------------------- supervisor (trusted)

def emit(event):
    data = (json.dumps(event) + "\n").encode()
    while data:
        data = data[os.write(RESULT_FD, data):]


def set_dumpable(flag):
    import ctypes
    PR_SET_DUMPABLE = 4
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1 if flag else 0, 0, 0, 0)


def become_subreaper():
    # Without a pid namespace, orphans of the worker would go to the host's init; as a child
    # subreaper they come back here, where reap_descendants can kill them.
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_descendants():
    # Kill our children level by level: a killed process's own children are reparented to us.
    me = os.getpid()
    while True:
        try:
            with open("/proc/%d/task/%d/children" % (me, me)) as listing:
                children = [int(pid) for pid in listing.read().split()]
        except OSError:
            return  # kernel without CONFIG_PROC_CHILDREN: the caller's group kill remains
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.wait()
        except ChildProcessError:
            return


class Relay:
    """Turns the worker's frames into verdict events, trusting none of them beyond its own state."""

    def __init__(self, payload, judge, count, pid):
        self.mode, self.judge, self.count, self.pid = payload["mode"], judge, count, pid
        self.per_test, self.max_timeouts = payload["perTestSeconds"], payload["maxTimeouts"]
        self.state = "confine"
        self.next = 0
        self.timeouts = 0

    def frame(self, frame):
        """Handles one frame; False stops the run (protocol broken)."""
        if not isinstance(frame, dict):
            return False
        kind = frame.get("t")
        if self.state == "confine":
            if kind == "fatal":
                emit({"t": "fatal", "message": text(frame.get("message"))})
                self.state = "over"
                return True
            self.state = "confined"
            return kind == "confined"
        if kind == "memory":
            emit({"t": "memory"})
            return True
        if self.state == "over":
            return True
        if self.mode == "syntax":
            return self.syntax(frame, kind)
        if self.mode == "tests":
            return self.tests(frame, kind)
        return True

    def syntax(self, frame, kind):
        if kind == "done" and self.next == self.count:
            emit({"t": "done"})
            self.state = "over"
            return True
        issue = frame.get("issue")
        if kind != "syntax" or frame.get("i") != self.next or not (issue is None or valid_issue(issue)):
            return False
        emit({"t": "syntax", "i": self.next, "issue": issue})
        self.next += 1
        return True

    def tests(self, frame, kind):
        if self.state == "confined":
            if kind == "load":
                emit({"t": "load", "type": text(frame.get("type")), "message": text(frame.get("message"))})
                self.state = "over"
                return True
            if kind == "loaded":
                emit({"t": "loaded"})
                self.state = "testing"
                return True
            return False
        if kind == "done":
            if self.next == self.count:
                emit({"t": "done"})
            self.state = "over"
            return True
        if kind != "r" or frame.get("i") != self.next or self.next >= self.count:
            return False
        outcome = self.judge.verdict(self.next, frame)
        if outcome is None:
            return False
        if outcome.get("timedOut"):
            outcome["message"] = "exceeded %gs" % self.per_test
            self.timeouts += 1
        outcome.update(t="test", i=self.next)
        emit(outcome)
        self.next += 1
        if outcome.get("errorType") == "MemoryError":
            emit({"t": "memory"})
            self.stop()
        elif self.timeouts >= self.max_timeouts and self.next < self.count:
            emit({"t": "skip", "from": self.next})
            self.stop()
        return True

    def stop(self):
        # Nothing the worker says from here on counts: stop it instead of waiting for it.
        self.state = "over"
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def broken(self):
        # The worker broke the protocol: the assert in flight fails, the rest are not run.
        if self.mode == "tests" and self.state == "testing" and self.next < self.count:
            emit({"t": "test", "i": self.next, "passed": False, "errorType": "ProtocolViolation",
                  "message": "the sandboxed process wrote an invalid result frame"})
            self.next += 1
            if self.next < self.count:
                emit({"t": "skip", "from": self.next})
        self.state = "over"


def valid_issue(issue):
    return (isinstance(issue, dict) and isinstance(issue.get("line"), int) and isinstance(issue.get("col"), int)
            and isinstance(issue.get("message"), str))


def pump(pid, channel, relay, plan_fd, plan):
    """Relays frames until the worker exits (not until EOF: its orphans may hold the pipe open)
    and returns the worker's (status, rusage)."""
    os.set_blocking(channel, False)
    if plan_fd is not None:
        os.set_blocking(plan_fd, False)
    try:
        exited = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exited = None
    pending, listening, ended = b"", True, None
    while ended is None:
        poller = select.poll()
        if listening:
            poller.register(channel, select.POLLIN)
        if plan_fd is not None:
            poller.register(plan_fd, select.POLLOUT)
        if exited is not None:
            poller.register(exited, select.POLLIN)
        ready = dict(poller.poll(None if exited is not None else 50))
        if plan_fd is not None and plan_fd in ready:
            try:
                plan = plan[os.write(plan_fd, plan):]
            except OSError:
                plan = b""
            if not plan:
                os.close(plan_fd)
                plan_fd = None
        if exited is None or exited in ready:
            waited, status, usage = os.wait4(pid, os.WNOHANG)
            if waited == pid:
                ended = (status, usage)
        # After the exit, orphans may still be writing: read only what is there, boundedly.
        budget = 2 * JUDGE_FRAME_BYTES if ended is not None else None
        while listening and (budget is None or budget > 0):
            try:
                chunk = os.read(channel, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                listening = False
                break
            if budget is not None:
                budget -= len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if len(pending) > JUDGE_FRAME_BYTES or not all(handle(relay, line) for line in lines):
                listening = False
                relay.broken()
                if ended is None:
                    os.kill(pid, signal.SIGKILL)
    for fd in (plan_fd, exited, channel):
        if fd is not None:
            os.close(fd)
    return ended


def handle(relay, line):
    if not line.strip():
        return True
    try:
        frame = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return relay.frame(frame)


def read_fd(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def supervisor():
    payload = read_fd(PAYLOAD_FD)
    os.environ.pop("PWD", None)  # set by bwrap --chdir; the environment stays the five variables
    mode = payload["mode"]
    if not payload["pidNamespace"]:
        become_subreaper()
    tree = None
    if mode == "tests":
        issue = parse_issue(payload["program"])
        if issue is not None:
            emit({"t": "syntax", "issue": issue})
            emit({"t": "exit", "code": 0, "signal": None, "cpuSeconds": 0})
            os._exit(0)
        tree = ast.parse(payload["program"])
    if payload["uid"] is None:
        set_dumpable(False)  # same uid as the worker: close /proc/<pid>/fd and ptrace to it
    plan_r, plan_w = os.pipe()
    channel_r, channel_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (RESULT_FD, TRUSTED_FD, plan_w, channel_r):
            os.close(fd)
        worker(payload, plan_r, channel_w)
    os.close(plan_r)
    os.close(channel_w)
    judge, plan, count = None, None, 0
    if mode == "tests":
        asserts = read_fd(TRUSTED_FD)["asserts"]
        judge = Judge(tree, asserts, payload["perTestSeconds"])
        # The judge evaluates dataset expressions: bounded like the worker's memory, and timed.
        set_limit(resource.RLIMIT_AS, payload["limits"]["memoryBytes"], payload["limits"]["memoryBytes"])
        signal.signal(signal.SIGALRM, on_alarm)
        plan, count = json.dumps(judge.items).encode(), len(asserts)
    else:
        os.close(TRUSTED_FD)
        if mode == "syntax":
            count = len(payload["programs"])
        os.close(plan_w)
        plan_w = None
    status, usage = pump(pid, channel_r, Relay(payload, judge, count, pid), plan_w, plan)
    emit({"t": "exit",
          "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
          "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
          "cpuSeconds": usage.ru_utime + usage.ru_stime})
    if not payload["pidNamespace"]:
        reap_descendants()
    os._exit(0)


supervisor()
`;

export const RUNNER_SOURCE = PRELUDE + WORKER_SOURCE + JUDGE_SOURCE + SUPERVISOR;
