/**
 * The Python program every sandboxed execution starts with (`python3 -c RUNNER_SOURCE`).
 *
 * Process shape: the runner is a two-process "supervisor + worker".
 *   supervisor  reads the JSON payload from fd 3, forks, waits with wait4 and reports the worker's
 *               exit status and CPU time on fd 4. Under `unshare --pid` it is pid 1 of the
 *               namespace, so its exit kills every process the user code left behind; without
 *               one it is a child subreaper and kills the leftovers itself.
 *   worker      applies the rlimits, drops to the sandbox uid, optionally blocks sockets, then runs
 *               one mode: `tests` (exec program once, exec each assert under its own timer),
 *               `run` (the program as `__main__`) or `syntax` (ast.parse a batch).
 * Results travel as JSON lines on fd 4, never on stdout/stderr, so user prints cannot forge them.
 *
 * Event lines (field `t`), the protocol parsed by python-sandbox.ts:
 *   {t:'syntax', i?, issue: null | {line, col, message}}
 *   {t:'load', type, message}       program raised while loading (tests mode)
 *   {t:'loaded'}                    program loaded; test events follow
 *   {t:'test', i, passed, errorType?, message?, timedOut?}
 *   {t:'skip', from}                maxTimeouts reached; tests from index `from` were not run
 *   {t:'memory'}                    a MemoryError (RLIMIT_AS) stopped the worker
 *   {t:'done'}                      the mode finished normally
 *   {t:'fatal', message}            the worker could not confine itself (nothing user-written ran)
 *   {t:'exit', code, signal, cpuSeconds}   written by the supervisor after the worker ended
 *
 * Kept as a TS string (not a .py file) so it ships inside the compiled package.
 * It must not contain a backtick or a dollar-brace.
 */
export const RUNNER_SOURCE = String.raw`
import ast, json, math, os, re, resource, signal, sys, traceback

PAYLOAD_FD, RESULT_FD = 3, 4
MESSAGE_CHARS = 1000

# Reference quirk (rewards/code_rewards.py): an assert shaped "assert f(args) == expected" is
# first evaluated in two parts (the call, then the expected value) and only then exec'd whole,
# so the candidate runs twice under the same timer.
PRE_EVAL = re.compile(r"assert\s+(\w+)\(([^)]*)\)\s*==\s*(.+)")


class SandboxTimeout(Exception):
    pass


def on_alarm(signum, frame):
    raise SandboxTimeout("assert timed out")


def read_payload():
    chunks = []
    while True:
        chunk = os.read(PAYLOAD_FD, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(PAYLOAD_FD)
    return json.loads(b"".join(chunks))


reporter_pid = None


def claim_reporting():
    global reporter_pid
    reporter_pid = os.getpid()


def emit(event):
    # Only the claiming process reports; a fork made by user code runs on silently.
    if os.getpid() != reporter_pid:
        return
    data = (json.dumps(event) + "\n").encode()
    while data:
        data = data[os.write(RESULT_FD, data):]


def describe(error):
    try:
        text = str(error)
    except BaseException:
        text = "<unprintable>"
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "..."


def set_limit(kind, soft, hard):
    # Clamped to the inherited hard limit: raising it fails without CAP_SYS_RESOURCE.
    ceiling = resource.getrlimit(kind)[1]
    if ceiling != resource.RLIM_INFINITY:
        soft, hard = min(soft, ceiling), min(hard, ceiling)
    resource.setrlimit(kind, (soft, hard))


def block_sockets():
    import _socket
    import socket  # noqa: F401 (must subclass the original _socket.socket before the swap)
    allowed = {getattr(_socket, "AF_UNIX", None)}
    original = _socket.socket

    class NoNetworkSocket(original):
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None and (_socket.AF_INET if family == -1 else family) not in allowed:
                raise PermissionError(13, "network access is disabled in the sandbox")
            original.__init__(self, family, type, proto, fileno)

    # socket.socket.__init__ calls _socket.socket.__init__ by module lookup, so this one
    # replacement covers socket.socket, socket.create_connection and raw _socket use.
    _socket.socket = NoNetworkSocket


def confine(payload):
    limits = payload["limits"]
    set_limit(resource.RLIMIT_CORE, 0, 0)
    # SIGXCPU at the soft limit names the cause; SIGKILL one second later if it is ignored.
    set_limit(resource.RLIMIT_CPU, limits["cpuSeconds"], limits["cpuSeconds"] + 1)
    set_limit(resource.RLIMIT_AS, limits["memoryBytes"], limits["memoryBytes"])
    set_limit(resource.RLIMIT_FSIZE, limits["maxFileBytes"], limits["maxFileBytes"])
    set_limit(resource.RLIMIT_NPROC, limits["maxProcesses"], limits["maxProcesses"])
    uid = payload["uid"]
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    if payload["blockSockets"]:
        block_sockets()
    os.set_inheritable(RESULT_FD, False)


def parse_issue(source):
    try:
        ast.parse(source)
        return None
    except SyntaxError as error:
        return {"line": error.lineno or 0, "col": error.offset or 0, "message": describe(error.msg)}
    except (ValueError, MemoryError, RecursionError) as error:
        return {"line": 0, "col": 0, "message": type(error).__name__ + ": " + describe(error)}


def run_assert(source, scope, seconds):
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            match = PRE_EVAL.search(source)
            if match:
                eval(match.group(1) + "(" + match.group(2) + ")", scope)
                eval(match.group(3), scope)
            exec(source, scope)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return {"passed": True}
    except SandboxTimeout:
        return {"passed": False, "timedOut": True, "errorType": "Timeout",
                "message": "exceeded %gs" % seconds}
    except BaseException as error:
        return {"passed": False, "errorType": type(error).__name__, "message": describe(error)}


def mode_tests(payload):
    program = payload["program"]
    issue = parse_issue(program)
    if issue is not None:
        emit({"t": "syntax", "issue": issue})
        return 0
    scope = {"math": math}
    try:
        # "<string>" as the file name, like the reference's exec(str), so messages read the same.
        exec(compile(program, "<string>", "exec"), scope)
    except BaseException as error:
        emit({"t": "load", "type": type(error).__name__, "message": describe(error)})
        if isinstance(error, MemoryError):
            emit({"t": "memory"})
        return 0
    emit({"t": "loaded"})
    signal.signal(signal.SIGALRM, on_alarm)
    timeouts = 0
    for index, source in enumerate(payload["asserts"]):
        if timeouts >= payload["maxTimeouts"]:
            emit({"t": "skip", "from": index})
            return 0
        outcome = run_assert(source, scope, payload["perTestSeconds"])
        timeouts += 1 if outcome.get("timedOut") else 0
        outcome.update(t="test", i=index)
        emit(outcome)
        if outcome.get("errorType") == "MemoryError":
            emit({"t": "memory"})
            return 0
    emit({"t": "done"})
    return 0


def mode_run(payload):
    scope = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(payload["program"], "<string>", "exec"), scope)
    except SystemExit as error:
        if error.code is None or isinstance(error.code, int):
            return error.code or 0
        print(error.code, file=sys.stderr)
        return 1
    except BaseException as error:
        if isinstance(error, MemoryError):
            emit({"t": "memory"})
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        return 1
    return 0


def mode_syntax(payload):
    for index, source in enumerate(payload["programs"]):
        emit({"t": "syntax", "i": index, "issue": parse_issue(source)})
    emit({"t": "done"})
    return 0


MODES = {"tests": mode_tests, "run": mode_run, "syntax": mode_syntax}


def worker(payload):
    claim_reporting()
    code = 70
    try:
        try:
            confine(payload)
        except BaseException as error:
            emit({"t": "fatal", "message": type(error).__name__ + ": " + describe(error)})
            return
        code = MODES[payload["mode"]](payload)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)


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


def supervisor():
    payload = read_payload()
    if not payload["pidNamespace"]:
        become_subreaper()
    pid = os.fork()
    if pid == 0:
        worker(payload)
    _, status, usage = os.wait4(pid, 0)
    claim_reporting()
    emit({"t": "exit",
          "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
          "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
          "cpuSeconds": usage.ru_utime + usage.ru_stime})
    if not payload["pidNamespace"]:
        reap_descendants()
    os._exit(0)


supervisor()
`;
