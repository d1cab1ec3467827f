/**
 * Debian packages as corpus sources: which version is installed, which files it owns (`dpkg -L`,
 * so a source never picks up files another package put in the same folder), and its copyright
 * file, which must state the licence the data card claims.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { DataError } from './errors.js';

const INSTALL_HINT = 'install the corpus sources with `sudo bash scripts/setup.sh --with-data` (Debian/Ubuntu)';

function dpkg(args: string[], what: string): string {
  try {
    return execFileSync(args[0], args.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 * 1024 * 1024 });
  } catch {
    throw new DataError('SOURCE_MISSING', what, 'Debian package is not installed (or dpkg is unavailable)', INSTALL_HINT);
  }
}

/** The installed version of `pkg`; throws SOURCE_MISSING when it is not installed. */
export function debVersion(pkg: string): string {
  const out = dpkg(['dpkg-query', '-W', `-f=\${Version}\t\${db:Status-Status}`, pkg], pkg).trim();
  const [version, status] = out.split('\t');
  if (status !== 'installed' || !version) throw new DataError('SOURCE_MISSING', pkg, `Debian package status is "${status ?? ''}"`, INSTALL_HINT);
  return version;
}

/** Regular files owned by `pkg` whose path matches `pattern`, sorted (byte order). */
export function debFiles(pkg: string, pattern: RegExp): string[] {
  debVersion(pkg);
  return dpkg(['dpkg', '-L', pkg], pkg)
    .split('\n')
    .filter((f) => pattern.test(f) && existsSync(f) && statSync(f).isFile())
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** /usr/share/doc/<pkg>/copyright (the doc folder may be a symlink to another package's). */
export function debCopyrightFile(pkg: string): string {
  const file = `/usr/share/doc/${pkg}/copyright`;
  if (!existsSync(file)) throw new DataError('SOURCE_MISSING', file, `no copyright file for ${pkg}`, INSTALL_HINT);
  return realpathSync(file);
}

/** Throws unless `pkg`'s copyright file matches `evidence` (the licence the data card states). */
export function checkDebLicence(pkg: string, evidence: RegExp): void {
  const file = debCopyrightFile(pkg);
  if (!evidence.test(readFileSync(file, 'utf8'))) {
    throw new DataError('SOURCE_FORMAT', file, `does not state the expected licence (${evidence.source})`, 'check the licence before using this source');
  }
}

/** Runs an installed program and returns its standard output (used for a decoder a package ships). */
export function runTool(cmd: string, args: readonly string[]): string {
  return dpkg([cmd, ...args], cmd);
}
