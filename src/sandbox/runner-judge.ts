/**
 * Python source of the judge: the trusted half of `runTests`, run by the supervisor process (part of
 * RUNNER_SOURCE, runner.ts), never by the worker that runs model code.
 *
 * Splitting. Each assert is parsed here. Calls of names the program may define (or that are not safe
 * builtins) become placeholders: only those calls, with their arguments, are sent to the worker.
 * The rest of the assert (the comparison, the expected value, the message) stays here and is
 * evaluated with the decoded return values, over a fixed set of pure builtins and `math`:
 *
 *     assert f(1, 2) == 3              worker: f(1, 2)           judge: _v0 == 3
 *     assert abs(f(2.5) - 0.5) < 1e-6  worker: f(2.5)            judge: abs(_v0 - 0.5) < 1e-6
 *
 * Returned values travel as tagged JSON and are decoded into exact builtins (int, float, complex,
 * str, bytes, bytearray, list, tuple, set, frozenset, dict, bool, None), so no object of the model's
 * takes part in the comparison. Forging the channel therefore buys no more than returning a value.
 *
 * Asserts that cannot be split run whole in the worker, as before, and are reported `lowTrust`:
 * one whose remaining part names something of the program (`assert len(calls) == 2`), or whose
 * placeholders sit where evaluation is conditional or repeated (and/or, if-else, chained
 * comparisons, comprehensions, lambdas), or that reads private attributes, or is not an assert.
 *
 * Reference fidelity on honest programs: calls run in the reference's order; the reference's double
 * call of `assert f(args) == expected` (PRE_EVAL) is kept when f is the program's; a value is read
 * right after the assert's calls, when the reference would compare it.
 *
 * Kept as a TS string so it ships inside the compiled package. No backtick, no dollar-brace.
 */
export const JUDGE_SOURCE = String.raw`
# ---------------------------------------------------------------- judge (trusted)

JUDGE_FRAME_BYTES = 8 << 20
PLACEHOLDER = "_magrpo_v%d"
MESSAGE_PLACEHOLDER = "_magrpo_m%d"

# Pure functions and types the trusted side evaluates with; no I/O, no reflection, no imports.
SAFE_NAMES = (
    "abs all any ascii bin bool bytearray bytes callable chr complex dict divmod enumerate filter "
    "float format frozenset hash hex int isinstance issubclass iter len list map max min next oct "
    "ord pow range repr reversed round set slice sorted str sum tuple type zip Ellipsis NotImplemented"
).split()
SAFE_BUILTINS = {name: getattr(builtins, name) for name in SAFE_NAMES}
SAFE_BUILTINS.update({name: value for name, value in vars(builtins).items()
                      if isinstance(value, type) and issubclass(value, BaseException)})
TRUSTED_NAMES = frozenset(SAFE_BUILTINS) | {"math"}

# Nodes under which a placeholder's call would not run exactly once, unconditionally.
CONDITIONAL = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
               ast.GeneratorExp, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)


class Unsplittable(Exception):
    pass


def bound_names(tree):
    """Every name the program binds anywhere (over-approximated), and whether it star-imports."""
    names, star = set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    star = True
                elif not (isinstance(node, ast.Import) and alias.name == "math" and alias.asname is None):
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names, star


class Splitter:
    def __init__(self, source, bound, star, prefix):
        self.source, self.bound, self.star, self.prefix = source, bound, star, prefix
        self.calls = []

    def trusted(self, name):
        return name in TRUSTED_NAMES and name not in self.bound and not self.star

    def program_name(self, name):
        """Only the sandbox can evaluate it: the program may bind it, or it is a builtin the judge lacks.
        Any other free name is unbound in both places (NameError either way)."""
        return self.star or name in self.bound or (hasattr(builtins, name) and name not in TRUSTED_NAMES)

    def split(self, node, guarded=False):
        """A copy of node with placeholders for the program's calls, in evaluation order."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not self.trusted(node.func.id):
            if guarded:
                raise Unsplittable("a call that may not run exactly once")
            self.calls.append(ast.get_source_segment(self.source, node))
            return ast.copy_location(ast.Name(id=self.prefix % (len(self.calls) - 1), ctx=ast.Load()), node)
        if isinstance(node, ast.Name):
            if not self.trusted(node.id) and self.program_name(node.id):
                raise Unsplittable("names %s" % node.id)
            return node
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise Unsplittable("private attribute")
        if isinstance(node, CONDITIONAL):
            return self.split_fields(node, True)
        if isinstance(node, ast.Compare) and len(node.ops) > 1:
            node.left = self.split(node.left, guarded)
            node.comparators = [self.split(c, guarded or i > 0) for i, c in enumerate(node.comparators)]
            return node
        if isinstance(node, ast.Dict):
            # Evaluated key, value, key, value: not in field order.
            keys, values = [], []
            for key, value in zip(node.keys, node.values):
                keys.append(None if key is None else self.split(key, guarded))
                values.append(self.split(value, guarded))
            node.keys, node.values = keys, values
            return node
        return self.split_fields(node, guarded)

    def split_fields(self, node, guarded):
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr)):
            # Bind names of their own; only a placeholder-free, name-free use would be safe. Rare.
            raise Unsplittable("comprehension, lambda or assignment expression")
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                setattr(node, field, self.split(value, guarded))
            elif isinstance(value, list):
                setattr(node, field, [self.split(v, guarded) if isinstance(v, ast.AST) else v for v in value])
        return node


def compile_expression(node):
    return compile(ast.fix_missing_locations(ast.Expression(body=node)), "<string>", "eval")


def syntax_failure(text, mode):
    """The error compiling text raises, as the reference's eval/exec would report it (None: it compiles)."""
    try:
        compile(text, "<string>", mode)
    except (SyntaxError, ValueError) as error:
        return [type(error).__name__, describe(error)]
    return None


def plan_assert(source, bound, star):
    """(worker item, trusted plan or None when the assert runs whole in the worker)."""
    low = ({"exec": source}, None)
    splitter = Splitter(source, bound, star, PLACEHOLDER)
    match = PRE_EVAL.search(source)
    # The reference evaluates the call once more before the assert (then the expected text, here).
    pre = [match.group(1) + "(" + match.group(2) + ")"] if match and not splitter.trusted(match.group(1)) else []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        # It fails whatever the program does; the sandbox only makes the reference's first call.
        failure = syntax_failure(match.group(3), "eval") if match else syntax_failure(source, "exec")
        return low if failure is None else ({"pre": pre, "calls": []}, {"fails": failure})
    except (MemoryError, RecursionError):
        return low
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return low
    statement = tree.body[0]
    try:
        if match:
            # The reference then evaluates the text after "==" in the program's scope: only the
            # program's calls in it go to the sandbox (the expected value itself never does).
            again = Splitter(match.group(3), bound, star, PLACEHOLDER)
            again.split(ast.parse(match.group(3), mode="eval").body)
            pre += again.calls
        test = splitter.split(statement.test)
        messages = Splitter(source, bound, star, MESSAGE_PLACEHOLDER)
        message = None if statement.msg is None else messages.split(statement.msg)
        trusted = {"test": compile_expression(test),
                   "message": None if message is None else compile_expression(message),
                   "calls": len(splitter.calls), "messageCalls": len(messages.calls)}
    except (Unsplittable, SyntaxError, ValueError, MemoryError, RecursionError):
        return low
    return {"pre": pre, "calls": splitter.calls, "messageCalls": messages.calls}, trusted


def decode(node, depth=0):
    """Tagged JSON back to exact builtins; anything else is rejected."""
    if depth > VALUE_DEPTH + 1:
        raise ValueError("too deep")
    if node is None or node is True or node is False:
        return node
    if not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise ValueError("not a tagged value")
    tag, args, down = node[0], node[1:], depth + 1
    if tag == "raise" and depth == 0 and len(args) == 2 and all(isinstance(a, str) for a in args):
        return Raised(args[0][:MESSAGE_CHARS], args[1][:MESSAGE_CHARS])
    if tag == "int" and len(args) == 1 and isinstance(args[0], str):
        return int(args[0], 16)
    if tag == "float" and len(args) == 1 and isinstance(args[0], str):
        return float.fromhex(args[0])
    if tag == "complex" and len(args) == 2 and all(isinstance(a, str) for a in args):
        return complex(float.fromhex(args[0]), float.fromhex(args[1]))
    if tag == "str" and len(args) == 1 and isinstance(args[0], str):
        return args[0]
    if tag in ("bytes", "bytearray") and len(args) == 1 and isinstance(args[0], str):
        return (bytes if tag == "bytes" else bytearray).fromhex(args[0])
    if tag in ("list", "tuple", "set", "frozenset") and len(args) == 1 and isinstance(args[0], list):
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(v, down) for v in args[0])
    if tag == "dict" and len(args) == 1 and isinstance(args[0], list):
        pairs = args[0]
        if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise ValueError("bad dict")
        return {decode(k, down): decode(v, down) for k, v in pairs}
    raise ValueError("unknown tag")


class Raised:
    """A message call that raised in the sandbox: its error replaces the message, as in the reference."""

    def __init__(self, error_type, message):
        self.error_type, self.message = error_type, message


def failed(error_type, message):
    return {"passed": False, "errorType": error_type, "message": message}


class Judge:
    def __init__(self, program_tree, asserts, seconds):
        self.seconds = seconds
        bound, star = bound_names(program_tree)
        plans = [plan_assert(source, bound, star) for source in asserts]
        self.items = [item for item, _ in plans]
        self.trusted = [plan for _, plan in plans]

    def verdict(self, index, frame):
        """The outcome of assert index from the worker's frame (None: the frame breaks the protocol)."""
        if frame.get("timedOut") is True:
            return {"passed": False, "timedOut": True, "errorType": "Timeout"}
        plan = self.trusted[index]
        if plan is None:
            if not isinstance(frame.get("passed"), bool):
                return None
            outcome = {"passed": frame["passed"], "lowTrust": True}
            if not frame["passed"]:
                outcome.update(errorType=text(frame.get("errorType")), message=text(frame.get("message")))
            return outcome
        if "error" in frame:
            error = frame["error"]
            return failed(text(error.get("type")), text(error.get("message"))) if isinstance(error, dict) else None
        if "fails" in plan:
            return failed(*plan["fails"])
        if "unsupported" in frame:
            return failed("UnsupportedValue", text(frame["unsupported"]))
        values, message_values = frame.get("values"), frame.get("messageValues", [])
        if not (isinstance(values, list) and len(values) == plan["calls"] and isinstance(message_values, list)
                and len(message_values) == plan["messageCalls"]):
            return None
        try:
            scope = {PLACEHOLDER % i: decode(v) for i, v in enumerate(values)}
            messages = {MESSAGE_PLACEHOLDER % i: decode(v) for i, v in enumerate(message_values)}
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as error:
            return failed("UnsupportedValue", "undecodable value: " + describe(error))
        if any(isinstance(v, Raised) for v in scope.values()):
            return None
        scope.update(messages, __builtins__=SAFE_BUILTINS, math=math)
        try:
            # The assert's own timer covers this part too, as in the reference.
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            try:
                if eval(plan["test"], scope):
                    return {"passed": True}
                raised = [v for v in messages.values() if isinstance(v, Raised)]
                if raised:
                    return failed(raised[0].error_type, raised[0].message)
                message = "" if plan["message"] is None else describe(eval(plan["message"], scope))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            return failed("AssertionError", message)
        except SandboxTimeout:
            return {"passed": False, "timedOut": True, "errorType": "Timeout"}
        except Exception as error:
            return failed(type(error).__name__, describe(error))


def text(value):
    return value[:MESSAGE_CHARS] if isinstance(value, str) else ""
`;
