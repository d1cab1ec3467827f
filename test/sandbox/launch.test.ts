import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SandboxError } from '../../src/sandbox/errors.js';
import type { NetworkMode } from '../../src/sandbox/options.js';
import { PythonSandbox } from '../../src/sandbox/python-sandbox.js';
import { optionalSkip, skipTest } from '../helpers/skip.js';

const sandbox = new PythonSandbox({ wallSeconds: 10, maxOutputBytes: 4096, maxFileBytes: 1 << 20 });

test('the child sees only the five sandbox variables, none of the parent', async () => {
  process.env.MAGRPO_SECRET_TEST = 'leaked';
  const result = await sandbox.run('import json, os\nprint(json.dumps(dict(os.environ)))');
  delete process.env.MAGRPO_SECRET_TEST;
  const env = JSON.parse(result.stdout) as Record<string, string>;
  assert.deepEqual(Object.keys(env).sort(), ['HOME', 'LANG', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONHASHSEED']);
  assert.equal(env.PATH, '/usr/bin:/bin');
  assert.equal(env.PYTHONHASHSEED, '0');
});

test('cwd and HOME are an empty temp dir that is removed afterwards (private /tmp under bwrap)', async () => {
  const program = [
    'import json, os',
    'here = os.getcwd()',
    'listing = os.listdir(".")',
    'open("scratch.txt", "w").write("x")',
    'print(json.dumps({"cwd": here, "home": os.environ["HOME"], "listing": listing}))',
  ].join('\n');
  const result = await sandbox.run(program);
  const seen = JSON.parse(result.stdout) as { cwd: string; home: string; listing: string[] };
  assert.deepEqual(seen.listing, []);
  assert.equal(seen.home, seen.cwd);
  if ((await sandbox.sandboxInfo()).privateFilesystem) {
    // A tmpfs of the run's own mount namespace: gone with it, never on the host.
    assert.equal(seen.cwd, '/tmp');
    assert.equal(existsSync(join(tmpdir(), 'scratch.txt')), false);
  } else {
    assert.equal(dirname(seen.cwd), tmpdir());
    assert.equal(existsSync(seen.cwd), false);
  }
});

test('stdin is closed unless given', async () => {
  const program = 'import sys\nprint(repr(sys.stdin.read()))';
  assert.equal((await sandbox.run(program)).stdout, "''\n");
  assert.equal((await sandbox.run(program, { stdin: 'line\n' })).stdout, "'line\\n'\n");
});

test('exit codes and uncaught exceptions come back as in a normal python run', async () => {
  const exited = await sandbox.run('import sys\nsys.exit(3)');
  assert.equal(exited.exitCode, 3);
  const raised = await sandbox.run('raise KeyError("k")');
  assert.equal(raised.exitCode, 1);
  assert.match(raised.stderr, /KeyError: 'k'\n$/);
});

test('huge output is truncated to maxOutputBytes and stops the run', async () => {
  const result = await sandbox.run('while True:\n    print("x" * 1000)');
  assert.equal(result.killed, 'output');
  assert.equal(result.stdout.length, 4096);
});

test('a sleeping program is killed at the wall-clock limit', async () => {
  const quick = new PythonSandbox({ wallSeconds: 0.5 });
  const result = await quick.run('import time\ntime.sleep(30)');
  assert.equal(result.killed, 'wall');
  assert.equal(result.exitCode, null);
});

test('files larger than maxFileBytes cannot be written', async () => {
  const result = await sandbox.run('open("big", "wb").write(b"x" * (2 << 20))');
  assert.match(result.stderr, /OSError: \[Errno 27\] File too large/);
});

test("as root, the program runs as the slot uid and cannot write the caller's directories", async (t) => {
  const info = await sandbox.sandboxInfo();
  if (info.firstUid === null) return skipTest(t, 'root', 'not running as root: the caller uid is kept');
  const guarded = mkdtempSync(join(tmpdir(), 'magrpo-guarded-'));
  after(() => rmSync(guarded, { recursive: true, force: true }));
  const program = `import os\nprint(os.getuid())\nopen(${JSON.stringify(join(guarded, 'f'))}, "w")`;
  const result = await sandbox.run(program);
  assert.equal(Number(result.stdout.trim()), info.firstUid);
  // Without a private filesystem the uid cannot write there; with one the directory is not even visible.
  assert.match(result.stderr, info.privateFilesystem ? /FileNotFoundError/ : /PermissionError/);
  assert.deepEqual(readdirSync(guarded), []);
});

/** Live processes (not zombies) whose name (/proc/<pid>/comm) is `name`. */
function processesNamed(name: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      const zombie = /^State:\s+Z/m.test(readFileSync(`/proc/${entry}/status`, 'utf8'));
      if (comm === name && !zombie) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

for (const network of ['namespace', 'socket-patch'] satisfies NetworkMode[]) {
  describe(`network: ${network}`, async () => {
    const isolated = new PythonSandbox({ network, maxProcesses: 12, wallSeconds: 10, concurrency: 1 });
    const available = await isolated.sandboxInfo().then(
      () => true,
      (error: unknown) => {
        if (error instanceof SandboxError && error.code === 'NO_ISOLATION') return false;
        throw error;
      },
    );

    const unavailable = optionalSkip('sandbox-isolation', !available && `network isolation "${network}" is unavailable here (NO_ISOLATION)`);
    test('cannot reach a server listening on the host loopback', { skip: unavailable }, async () => {
      const server = createServer((socket) => socket.end('hello'));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as { port: number };
      const program = [
        'import errno, socket',
        'try:',
        `    print("connected", socket.create_connection(("127.0.0.1", ${port}), timeout=2).recv(5))`,
        'except OSError as e:',
        '    print(errno.errorcode.get(e.errno), e)',
      ].join('\n');
      const result = await isolated.run(program);
      server.close();
      // In a fresh namespace the loopback is down (unshare) or up but empty (bwrap): nobody listens there.
      const expected = network === 'namespace' ? /^(ENETUNREACH|ECONNREFUSED)/ : /^EACCES .*network access is disabled/;
      assert.match(result.stdout, expected);
    });

    test('the namespace has no interface but loopback', {
      skip: unavailable || optionalSkip('sandbox-no-namespace', network !== 'namespace' && `network mode ${network}: no namespace of its own to list`),
    }, async () => {
      const result = await isolated.run('import socket\nprint([name for _, name in socket.if_nameindex()])');
      assert.equal(result.stdout.trim(), "['lo']");
    });

    test('a fork bomb fails at maxProcesses and leaves no process behind', { skip: unavailable }, async () => {
      // Each forked sleeper renames itself so that leftovers can be found afterwards.
      const marker = `sbx${process.pid}`.slice(0, 15);
      const counted = await isolated.run(
        [
          'import ctypes, os, time',
          'n = 0',
          'try:',
          '    while True:',
          '        if os.fork() == 0:',
          `            ctypes.CDLL(None).prctl(15, b"${marker}", 0, 0, 0)  # PR_SET_NAME`,
          '            print(open("/proc/self/comm").read().strip(), flush=True)',
          '            time.sleep(30)',
          '            os._exit(0)',
          '        n += 1',
          'except OSError as e:',
          '    time.sleep(0.2)',
          '    print(n, type(e).__name__, flush=True)',
        ].join('\n'),
      );
      const lines = counted.stdout.trim().split('\n');
      const [forks, errorType] = lines[lines.length - 1].split(' ');
      assert.equal(errorType, 'BlockingIOError');
      assert.ok(Number(forks) < 12, `forked ${forks} times`);
      assert.ok(lines.includes(marker), 'the sleepers were named');
      assert.deepEqual(processesNamed(marker), []);

      const bomb = await isolated.run('import os\nwhile True:\n    os.fork()');
      assert.notEqual(bomb.killed, 'wall'); // it collapsed on its own instead of running until killed
    });
  });
}
