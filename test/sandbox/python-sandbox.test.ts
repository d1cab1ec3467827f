import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PythonSandbox } from '../../src/sandbox/python-sandbox.js';

// Small limits keep the file fast; each test states the ones it relies on.
const sandbox = new PythonSandbox({ perTestTimeoutSeconds: 0.3, maxTimeouts: 2, cpuSeconds: 2, wallSeconds: 10, memoryMb: 256 });

const INC = 'def inc(x):\n    return x + 1\n';

test('reports passing and failing asserts with error type and message', async () => {
  const result = await sandbox.runTests(INC, [
    'assert inc(1) == 2',
    'assert inc(1) == 3, "off by one"',
    'assert inc(None) == 1',
    'assert 1 / (inc(0) - 1) == 0',
    'assert missing(1) == 2',
  ]);
  assert.equal(result.ok, true);
  assert.deepEqual(
    result.tests.map(({ passed, errorType, message }) => ({ passed, errorType, message })),
    [
      { passed: true, errorType: undefined, message: undefined },
      { passed: false, errorType: 'AssertionError', message: 'off by one' },
      { passed: false, errorType: 'TypeError', message: "unsupported operand type(s) for +: 'NoneType' and 'int'" },
      { passed: false, errorType: 'ZeroDivisionError', message: 'division by zero' },
      { passed: false, errorType: 'NameError', message: "name 'missing' is not defined" },
    ],
  );
  assert.equal(result.passed, 1);
  assert.equal(result.total, 5);
  assert.equal(result.timeouts, 0);
  assert.equal(result.killed, undefined);
});

test('reports a syntax error with line and column and runs no assert', async () => {
  const result = await sandbox.runTests('def f(x):\n    return (x +\n\ndef g():\n    pass\n', ['assert f(1) == 1']);
  assert.equal(result.ok, false);
  assert.deepEqual(result.syntaxError, { line: 2, col: 12, message: "'(' was never closed" });
  assert.deepEqual(result.tests, [{ source: 'assert f(1) == 1', passed: false, skipped: true }]);
});

test('an error while loading the program is a loadError; compile-only errors are not syntax errors (ast.parse accepts them)', async () => {
  const raised = await sandbox.runTests(`${INC}raise ValueError("boom")\n`, ['assert inc(1) == 2']);
  assert.equal(raised.ok, false);
  assert.deepEqual(raised.loadError, { type: 'ValueError', message: 'boom' });
  assert.equal(raised.passed, 0);

  const compileOnly = await sandbox.runTests('return 1\n', []);
  assert.equal(compileOnly.syntaxError, undefined);
  assert.equal(compileOnly.loadError?.type, 'SyntaxError');
});

test('globals are seeded with math, as in the reference', async () => {
  const result = await sandbox.runTests('def root(x):\n    return math.sqrt(x)\n', ['assert root(9) == 3']);
  assert.equal(result.passed, 1);
});

test('asserts shaped `assert f(args) == expected` call the function twice (reference quirk)', async () => {
  const program = 'calls = []\ndef f(x):\n    calls.append(x)\n    return x\n';
  const result = await sandbox.runTests(program, ['assert f(1) == 1', 'assert len(calls) == 2', 'assert f(2) in [2]', 'assert len(calls) == 3']);
  assert.deepEqual(
    result.tests.map((t) => t.passed),
    [true, true, true, true],
  );
});

test('each assert has its own timer; after maxTimeouts timeouts the rest are skipped', async () => {
  const program = 'def spin(x):\n    while x:\n        pass\n    return 0\n';
  const result = await sandbox.runTests(program, ['assert spin(1) == 0', 'assert spin(0) == 0', 'assert spin(1) == 0', 'assert spin(0) == 0']);
  assert.equal(result.ok, true);
  assert.deepEqual(
    result.tests.map(({ passed, timedOut, skipped, errorType }) => ({ passed, timedOut, skipped, errorType })),
    [
      { passed: false, timedOut: true, skipped: undefined, errorType: 'Timeout' },
      { passed: true, timedOut: undefined, skipped: undefined, errorType: undefined },
      { passed: false, timedOut: true, skipped: undefined, errorType: 'Timeout' },
      { passed: false, timedOut: undefined, skipped: true, errorType: undefined },
    ],
  );
  assert.equal(result.timeouts, 2);
  assert.equal(result.passed, 1);
});

test('a program looping at top level is killed by the CPU limit', async () => {
  const result = await sandbox.runTests('while True:\n    pass\n', ['assert True']);
  assert.equal(result.ok, false);
  assert.equal(result.killed, 'cpu');
  assert.equal(result.tests[0].skipped, true);
});

test('a hang the per-assert timer cannot interrupt is killed by the wall clock; earlier results survive', async () => {
  const slow = new PythonSandbox({ perTestTimeoutSeconds: 0.3, cpuSeconds: 30, wallSeconds: 1.5 });
  // sum() over a range runs in C without checking signals, so SIGALRM waits.
  const result = await slow.runTests(INC, ['assert inc(1) == 2', 'assert sum(range(10**12)) == 0', 'assert inc(2) == 3']);
  assert.equal(result.killed, 'wall');
  assert.deepEqual(
    result.tests.map(({ passed, errorType, skipped }) => ({ passed, errorType, skipped })),
    [
      { passed: true, errorType: undefined, skipped: undefined },
      { passed: false, errorType: 'Killed', skipped: undefined },
      { passed: false, errorType: undefined, skipped: true },
    ],
  );
});

test('a memory bomb hits RLIMIT_AS and is reported, at load or inside an assert', async () => {
  const atLoad = await sandbox.runTests('hog = bytearray(1 << 30)\n', ['assert True']);
  assert.equal(atLoad.killed, 'memory');
  assert.equal(atLoad.loadError?.type, 'MemoryError');

  const inAssert = await sandbox.runTests(INC, ['assert len(bytearray(1 << 30)) > 0', 'assert inc(1) == 2']);
  assert.equal(inAssert.killed, 'memory');
  assert.equal(inAssert.tests[0].errorType, 'MemoryError');
  assert.equal(inAssert.tests[1].skipped, true);
});

test('only the worker reports: a fork of the user code cannot add results', async () => {
  // The child carries on into the asserts; the parent fails at load once the child is done.
  const program = `import os\nif os.fork():\n    os.wait()\n    raise RuntimeError("parent")\n${INC}`;
  const result = await sandbox.runTests(program, ['assert inc(1) == 2']);
  assert.equal(result.ok, false);
  assert.deepEqual(result.loadError, { type: 'RuntimeError', message: 'parent' });
  assert.equal(result.tests[0].skipped, true);
});

test('a split assert runs only its calls in the sandbox; the comparison sees plain builtin values', async () => {
  const program = [
    'import collections',
    'def counts(s):',
    '    return collections.Counter(s)',
    'def point(x):',
    '    return collections.namedtuple("P", "x y")(x, x)',
    'class Always(int):',
    '    __eq__ = lambda self, other: True',
    'def forged(x):',
    '    return Always(0)',
    'def opaque(x):',
    '    return object()',
    '',
  ].join('\n');
  const result = await sandbox.runTests(program, [
    "assert counts('aab') == {'a': 2, 'b': 1}", // a dict subclass compares as its dict
    'assert point(3) == (3, 3)', // a tuple subclass as its tuple
    'assert forged(1) == 5', // its __eq__ never runs: it is the int 0
    'assert opaque(1) == 1',
    'assert abs(forged(1) - 0.5) < 1', // the rest of the expression is evaluated by the judge
  ]);
  assert.deepEqual(
    result.tests.map(({ passed, errorType }) => ({ passed, errorType })),
    [
      { passed: true, errorType: undefined },
      { passed: true, errorType: undefined },
      { passed: false, errorType: 'AssertionError' },
      { passed: false, errorType: 'UnsupportedValue' },
      { passed: true, errorType: undefined },
    ],
  );
  assert.match(result.tests[3].message ?? '', /a value of type object cannot leave the sandbox/);
  assert.equal(result.lowTrust, 0);
});

test('asserts that cannot be split run whole in the sandbox and are counted as lowTrust', async () => {
  const program = 'calls = []\ndef f(x):\n    calls.append(x)\n    return x\n';
  // f runs twice per `assert f(..) == ..` (the reference's pre-evaluation, kept for split asserts too).
  const result = await sandbox.runTests(program, ['assert f(1) == 1', 'assert len(calls) == 2', 'assert f(1) == 1 or f(2) == 2', 'assert len(calls) == 4']);
  assert.deepEqual(
    result.tests.map((t) => [t.passed, t.lowTrust ?? false]),
    [
      [true, false],
      [true, true], // names the program's list
      [true, true], // a call under `or` may not run
      [true, true],
    ],
  );
  assert.equal(result.lowTrust, 3);
});

test("a failing assert's message is the reference's, including calls in it; an uncompilable assert fails in the judge", async () => {
  const program = 'calls = []\ndef f(x):\n    calls.append(x)\n    return x + 1\n';
  const result = await sandbox.runTests(program, ['assert f(1) == 3, "got " + str(f(1))', 'assert f(1) == [', 'assert len(calls) == 5']);
  assert.deepEqual(
    result.tests.map(({ passed, errorType, message }) => ({ passed, errorType, message })),
    [
      { passed: false, errorType: 'AssertionError', message: 'got 2' },
      { passed: false, errorType: 'SyntaxError', message: "'[' was never closed (<string>, line 1)" },
      // As in the reference, f ran 4 times for the first assert (pre-evaluation of the call and of the
      // text after ==, the assert, its message), then once before the broken one.
      { passed: true, errorType: undefined, message: undefined },
    ],
  );
});

test('a frame forged by model code breaks the protocol: that assert fails, the rest are not run', async () => {
  const program = [
    'import os',
    'def f(x):',
    '    for fd in range(3, 32):',
    '        try:',
    '            os.write(fd, b\'{"t":"r","i":1,"passed":true}\\n{"t":"test","i":1,"passed":true}\\n\')',
    '        except OSError:',
    '            pass',
    '    return x',
    '',
  ].join('\n');
  const result = await sandbox.runTests(program, ['assert f(1) == 1', 'assert f(2) == 2', 'assert f(3) == 3']);
  assert.deepEqual(
    result.tests.map(({ passed, errorType, skipped }) => ({ passed, errorType, skipped })),
    [
      { passed: false, errorType: 'ProtocolViolation', skipped: undefined },
      { passed: false, errorType: undefined, skipped: true },
      { passed: false, errorType: undefined, skipped: true },
    ],
  );
});

test('checkSyntax parses in the sandbox, one program or a batch', async () => {
  assert.equal(await sandbox.checkSyntax(INC), null);
  assert.deepEqual(await sandbox.checkSyntaxBatch(['x = 1', 'def f(:\n    pass', 'a\0b']), [
    null,
    { line: 1, col: 7, message: 'invalid syntax' },
    { line: 0, col: 0, message: 'ValueError: source code string cannot contain null bytes' },
  ]);
});

test('never runs more programs at once than `concurrency`', async () => {
  const pair = new PythonSandbox({ concurrency: 2 });
  const program = 'import time\nstart = time.time()\ntime.sleep(0.3)\nprint(start, time.time())\n';
  const runs = await Promise.all(Array.from({ length: 6 }, () => pair.run(program)));
  const marks = runs.flatMap((r) => {
    const [start, end] = r.stdout.trim().split(' ').map(Number);
    return [
      { at: start, step: 1 },
      { at: end, step: -1 },
    ];
  });
  marks.sort((a, b) => a.at - b.at || a.step - b.step);
  let running = 0;
  let most = 0;
  for (const mark of marks) {
    running += mark.step;
    most = Math.max(most, running);
  }
  assert.equal(most, 2);
});

test('sandboxInfo and isolation() name the isolation actually in force', async () => {
  const info = await sandbox.sandboxInfo();
  const isolation = await sandbox.isolation();
  assert.equal(isolation.level, info.level);
  assert.equal(info.privateFilesystem, info.level === 'bwrap');
  assert.match(isolation.detail, info.level === 'bwrap' ? /private \/tmp, no host files/ : /host filesystem/);
  assert.ok(info.network === 'namespace' || info.network === 'socket-patch');
  assert.equal(info.pidNamespace, info.network === 'namespace');
  assert.match(info.pythonVersion, /^3\.\d+\.\d+/);
  assert.equal(info.firstUid === null, process.getuid?.() !== 0);
});
