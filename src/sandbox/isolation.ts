/**
 * The isolation candidates of the sandbox, strongest first, and the command prefix of each.
 *
 *   bwrap         bubblewrap: fresh mount, network, pid, IPC and UTS namespaces. The program sees a
 *                 read-only /usr (with the /bin, /lib... links), the loader cache, the interpreter,
 *                 a new /proc of its own pid namespace, a minimal /dev, and a private size-capped
 *                 tmpfs /tmp as cwd and HOME: nothing of the repository, the datasets, the home
 *                 directory or other processes' temp files.
 *   unshare       `unshare --net --pid`: network and pid namespaces only. The host filesystem stays
 *                 visible (readable where world-readable; writable only where the sandbox uid may).
 *   rlimits-only  no namespace: rlimits, the uid drop (as root) and a best-effort socket patch.
 *
 * Each candidate must pass the probe in python-sandbox.ts before it is used; a fallback is logged
 * once per process (process.emitWarning) and reported by `PythonSandbox.isolation()`.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, lstatSync, readdirSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { NetworkMode } from './options.js';

export type IsolationLevel = 'bwrap' | 'unshare' | 'rlimits-only';

/** What the sandbox runs under, for `magrpo doctor` and run logs. */
export interface IsolationReport {
  level: IsolationLevel;
  /** One line: what the level means here, and why a stronger one was not used. */
  detail: string;
}

export interface Isolation {
  level: IsolationLevel;
  network: 'namespace' | 'socket-patch';
  prefix: string[];
  pidNamespace: boolean;
  /** As root, the worker drops to a sandbox uid of its own. */
  dropUid: boolean;
  /** The prefix gives the program a private /tmp as cwd and HOME; no host temp dir is made. */
  privateTmp: boolean;
}

/** Inside a bwrap sandbox, the program's cwd and HOME. */
export const PRIVATE_TMP = '/tmp';

const SEARCH_PATH = ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin'];

/** Directories Debian-like systems keep at / that the dynamic loader and python need (or links to /usr). */
const ROOT_LINKS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/** Files under /etc the loader and the standard library read; the rest of /etc stays hidden. */
const ETC_FILES = ['/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d', '/etc/localtime'];

function findExecutable(name: string): string | null {
  if (name.startsWith('/')) return existsSync(name) ? name : null;
  for (const dir of SEARCH_PATH) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** Host directories the interpreter needs besides /usr (e.g. a pyenv or /opt install), read-only. */
function interpreterDirs(python: string): string[] {
  const found = findExecutable(python);
  if (!found) return [];
  const real = realpathSync(found);
  if (real.startsWith('/usr/')) return [];
  // The configured interpreter is trusted (no model code runs here): ask it where it lives.
  const asked = spawnSync(real, ['-s', '-c', 'import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]))'], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
    timeout: 10_000,
  });
  const prefixes: string[] = asked.status === 0 ? (JSON.parse(asked.stdout) as string[]) : [];
  const dirs = new Set([dirname(real), ...prefixes].filter((d) => d.startsWith('/') && !d.startsWith('/usr/') && d !== '/usr' && d !== '/'));
  return [...dirs].sort();
}

/** `bwrap` arguments up to (not including) the interpreter. */
export function bwrapPrefix(bwrap: string, python: string, tmpBytes: number, root: boolean): string[] {
  // --as-pid-1: no bwrap init in the namespace. That init would keep copies of fds 3-6 (payload,
  // verdicts, asserts), which a worker of the same uid could reopen through /proc/1/fd.
  const args = [bwrap, '--unshare-net', '--unshare-pid', '--as-pid-1', '--unshare-ipc', '--unshare-uts', '--die-with-parent'];
  args.push('--ro-bind', '/usr', '/usr');
  for (const path of ROOT_LINKS) {
    try {
      const stat = lstatSync(path);
      if (stat.isSymbolicLink()) args.push('--symlink', readlinkSync(path), path);
      else if (stat.isDirectory()) args.push('--ro-bind', path, path);
    } catch {
      // absent on this system
    }
  }
  const etc = [
    ...ETC_FILES,
    ...safeList('/etc')
      .filter((name) => /^python3/.test(name))
      .map((name) => `/etc/${name}`),
  ];
  for (const path of etc) args.push('--ro-bind-try', path, path);
  for (const dir of interpreterDirs(python)) args.push('--ro-bind', dir, dir);
  args.push('--proc', '/proc', '--dev', '/dev');
  args.push('--perms', '1777', '--size', String(tmpBytes), '--tmpfs', PRIVATE_TMP, '--chdir', PRIVATE_TMP);
  // As root bwrap keeps root's capabilities; the supervisor needs these three to drop the worker
  // to its uid and to kill it, and nothing more.
  if (root) args.push('--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--cap-add', 'CAP_KILL');
  args.push('--');
  return args;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Candidates in order of preference for a network mode; `namespace` excludes the socket patch. */
export function candidateIsolations(mode: NetworkMode, root: boolean, python: string, tmpBytes: number): { candidates: Isolation[]; skipped: string[] } {
  const skipped: string[] = [];
  const candidates: Isolation[] = [];
  const bwrap = findExecutable('bwrap');
  if (mode !== 'socket-patch') {
    if (bwrap) {
      candidates.push({
        level: 'bwrap',
        network: 'namespace',
        prefix: bwrapPrefix(bwrap, python, tmpBytes, root),
        pidNamespace: true,
        dropUid: root,
        privateTmp: true,
      });
    } else {
      skipped.push('bwrap: not installed (Debian: apt-get install bubblewrap)');
    }
    // As root `unshare` needs no user namespace. Otherwise a new one, deliberately without a uid map:
    // python then runs as an unmapped uid with no capabilities (root mapped inside would hold
    // CAP_SYS_PTRACE over the supervisor), with the caller's file permissions.
    const userns = root ? [] : ['--user'];
    candidates.push({
      level: 'unshare',
      network: 'namespace',
      prefix: ['unshare', ...userns, '--net', '--pid', '--fork', '--kill-child'],
      pidNamespace: true,
      dropUid: root,
      privateTmp: false,
    });
  }
  if (mode !== 'namespace')
    candidates.push({ level: 'rlimits-only', network: 'socket-patch', prefix: [], pidNamespace: false, dropUid: root, privateTmp: false });
  return { candidates, skipped };
}

const MEANING: Record<IsolationLevel, string> = {
  bwrap: 'bubblewrap mount/net/pid namespaces: read-only /usr, private /tmp, no host files, no network',
  unshare: 'net/pid namespaces only: the host filesystem is visible to model code (install bubblewrap for a private root)',
  'rlimits-only': 'no namespaces: rlimits, uid drop as root, socket patch; model code sees the host filesystem and can reach the network through subprocesses',
};

export function describeIsolation(level: IsolationLevel, fallbackReasons: string[]): IsolationReport {
  const why = fallbackReasons.length > 0 ? ` (not used: ${fallbackReasons.join('; ')})` : '';
  return { level, detail: `${MEANING[level]}${why}` };
}
