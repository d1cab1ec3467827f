/**
 * Python source of the sandbox worker: the process that runs model-written code (part of
 * RUNNER_SOURCE, runner.ts). Everything it says is untrusted: once the program is loaded, the model
 * controls this interpreter, so it may rewrite these functions or write any bytes on its channel.
 * The design makes that harmless: the worker never holds the expected values or the verdict
 * channel (fd 4), and for split asserts it only reports the values its calls returned (see
 * runner-judge.ts), which the trusted supervisor decodes into plain builtins and compares.
 *
 * Frames sent to the supervisor (JSON lines on the channel pipe):
 *   {t:'confined'} | {t:'fatal', message}    first frame, before any user code runs
 *   {t:'syntax', i, issue}                   syntax mode, one per program
 *   {t:'load', type, message} | {t:'loaded'} tests mode, after exec of the program
 *   {t:'r', i, values:[...], messageValues:[...]}   split assert: encoded return values of its calls
 *                                           (and of its message's calls, or ['raise', type, message])
 *   {t:'r', i, unsupported: message}         split assert: a value that cannot leave the sandbox
 *   {t:'r', i, error:{type, message}}        split assert: a call raised
 *   {t:'r', i, timedOut:true}                the assert exceeded its timer
 *   {t:'r', i, passed, errorType?, message?} low-trust assert, judged here (reported as such)
 *   {t:'memory'} | {t:'done'}
 *
 * Kept as a TS string so it ships inside the compiled package. No backtick, no dollar-brace.
 */
export const WORKER_SOURCE = String.raw`
# ---------------------------------------------------------------- worker (untrusted once loaded)

MESSAGE_CHARS = 1000
VALUE_DEPTH = 100
# A value frame larger than this is reported as unsupported (the supervisor enforces its own cap).
VALUE_FRAME_BYTES = 4 << 20

# Reference quirk (rewards/code_rewards.py): an assert shaped "assert f(args) == expected" is
# first evaluated in two parts (the call, then the expected value) and only then exec'd whole,
# so the candidate runs twice under the same timer.
PRE_EVAL = re.compile(r"assert\s+(\w+)\(([^)]*)\)\s*==\s*(.+)")


class SandboxTimeout(Exception):
    pass


class Unsupported(Exception):
    pass


def on_alarm(signum, frame):
    raise SandboxTimeout("assert timed out")


def describe(error):
    try:
        text = str(error)
    except BaseException:
        text = "<unprintable>"
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "..."


channel_fd = None
sender_pid = None


def send(frame):
    # Only the worker itself reports; a fork made by user code runs on silently.
    if os.getpid() != sender_pid:
        return
    data = (json.dumps(frame) + "\n").encode()
    while data:
        data = data[os.write(channel_fd, data):]


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


def encode(value, depth=0):
    """Exact builtin values as tagged JSON. Instances of builtin subclasses are sent as their base
    value, read through the base type's own methods, so an overridden __eq__ never takes part."""
    if depth > VALUE_DEPTH:
        raise Unsupported("value nested deeper than %d levels" % VALUE_DEPTH)
    if value is None or value is True or value is False:
        return value
    down = depth + 1
    if isinstance(value, int):
        return ["int", "%x" % int.__int__(value)]
    if isinstance(value, float):
        return ["float", float.hex(value)]
    if isinstance(value, complex):
        return ["complex", float.hex(complex.real.__get__(value)), float.hex(complex.imag.__get__(value))]
    if isinstance(value, str):
        return ["str", str.__str__(value)]
    if isinstance(value, bytes):
        return ["bytes", bytes.hex(value)]
    if isinstance(value, bytearray):
        return ["bytearray", bytearray.hex(value)]
    for kind in (list, tuple, set, frozenset):
        if isinstance(value, kind):
            return [kind.__name__, [encode(item, down) for item in kind.__iter__(value)]]
    if isinstance(value, dict):
        return ["dict", [[encode(k, down), encode(v, down)] for k, v in dict.items(value)]]
    raise Unsupported("a value of type %s cannot leave the sandbox (only builtin values can)" % type(value).__name__)


def run_calls(item, scope, seconds):
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            for source in item["pre"]:
                eval(source, scope)
            values = [eval(source, scope) for source in item["calls"]]
            # The message's calls run now, not only on failure: the judge alone knows the verdict.
            messages = [message_value(source, scope) for source in item.get("messageCalls", ())]
            encoded = [encode(value) for value in values]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except SandboxTimeout:
        return {"timedOut": True}
    except Unsupported as error:
        return {"unsupported": describe(error)}
    except BaseException as error:
        return {"error": {"type": type(error).__name__, "message": describe(error)}}
    frame = {"values": encoded, "messageValues": messages}
    if len(json.dumps(frame)) > VALUE_FRAME_BYTES:
        return {"unsupported": "returned values larger than %d bytes" % VALUE_FRAME_BYTES}
    return frame


def message_value(source, scope):
    try:
        return encode(eval(source, scope))
    except SandboxTimeout:
        raise
    except BaseException as error:
        return ["raise", type(error).__name__, describe(error)]


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
        return {"timedOut": True}
    except BaseException as error:
        return {"passed": False, "errorType": type(error).__name__, "message": describe(error)}


def read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def worker_tests(payload, plan_fd):
    scope = {"math": math}
    try:
        # "<string>" as the file name, like the reference's exec(str), so messages read the same.
        exec(compile(payload["program"], "<string>", "exec"), scope)
    except BaseException as error:
        send({"t": "load", "type": type(error).__name__, "message": describe(error)})
        if isinstance(error, MemoryError):
            send({"t": "memory"})
        return 0
    send({"t": "loaded"})
    plan = read_all(plan_fd)
    signal.signal(signal.SIGALRM, on_alarm)
    timeouts = 0
    for index, item in enumerate(plan):
        if timeouts >= payload["maxTimeouts"]:
            break
        if "exec" in item:
            outcome = run_assert(item["exec"], scope, payload["perTestSeconds"])
        else:
            outcome = run_calls(item, scope, payload["perTestSeconds"])
        timeouts += 1 if outcome.get("timedOut") else 0
        outcome.update(t="r", i=index)
        send(outcome)
        if outcome.get("errorType") == "MemoryError" or outcome.get("error", {}).get("type") == "MemoryError":
            send({"t": "memory"})
            return 0
    send({"t": "done"})
    return 0


def worker_run(payload):
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
            send({"t": "memory"})
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        return 1
    return 0


def worker_syntax(payload):
    for index, source in enumerate(payload["programs"]):
        send({"t": "syntax", "i": index, "issue": parse_issue(source)})
    send({"t": "done"})
    return 0


def worker(payload, plan_fd, send_fd):
    global channel_fd, sender_pid
    channel_fd, sender_pid = send_fd, os.getpid()
    code = 70
    try:
        try:
            confine(payload)
        except BaseException as error:
            send({"t": "fatal", "message": type(error).__name__ + ": " + describe(error)})
            return
        send({"t": "confined"})
        mode = payload["mode"]
        if mode == "tests":
            code = worker_tests(payload, plan_fd)
        elif mode == "run":
            code = worker_run(payload)
        else:
            code = worker_syntax(payload)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)
`;
