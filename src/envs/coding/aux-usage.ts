/**
 * Our corrected "aux called but its value ignored" detector. The reference reward's regex almost
 * never fires (code-utils.ts referenceIgnoredAuxCalls); the authors' own later level_feedback uses an
 * AST analysis instead. This is that idea, in our words, run with Python's `ast` in the sandbox
 * (the code is parsed, never executed). A call `aux(...)` is flagged when
 *   - it is a statement of its own (its value is dropped), or
 *   - it is the value of an assignment to plain names none of which is read afterwards: later in
 *     the source, or anywhere inside a loop enclosing the assignment (the next iteration reads it).
 * Every other use (return, argument, operand, condition, container, attribute ...) counts as used.
 */
import type { PythonSandbox } from '../../sandbox/index.js';

const ANALYZER = `
import ast, json, sys

NAME = "aux"

def pos(node):
    return (node.lineno, node.col_offset)

def end(node):
    return (node.end_lineno, node.end_col_offset)

def plain_names(target):
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        names = []
        for element in target.elts:
            inner = plain_names(element.value if isinstance(element, ast.Starred) else element)
            if inner is None:
                return None
            names.extend(inner)
        return names
    return None

def ignored_calls(source):
    tree = ast.parse(source)
    parent = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
    reads = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.id, []).append(node)

    def enclosing_loops(node):
        loops, p = [], parent.get(node)
        while p is not None:
            if isinstance(p, (ast.For, ast.AsyncFor, ast.While)):
                loops.append(p)
            p = parent.get(p)
        return loops

    def read_after(name, stmt):
        loops = enclosing_loops(stmt)
        for r in reads.get(name, []):
            if pos(r) >= end(stmt) or any(pos(l) <= pos(r) <= end(l) for l in loops):
                return True
        return False

    issues = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == NAME):
            continue
        p = parent.get(node)
        if isinstance(p, ast.Expr):
            issues.append((node.lineno, "standalone call (not assigned)"))
        elif isinstance(p, (ast.Assign, ast.AnnAssign)) and p.value is node:
            targets = p.targets if isinstance(p, ast.Assign) else [p.target]
            groups = [plain_names(t) for t in targets]
            if any(g is None for g in groups):
                continue
            names = [n for g in groups for n in g]
            if names and not any(read_after(n, p) for n in names):
                issues.append((node.lineno, "assigned to " + ", ".join(names) + " but never used"))
    issues.sort()
    return ["Line %d: %s" % issue for issue in issues]

try:
    found = ignored_calls(json.loads(sys.stdin.read()))
except Exception:
    found = []
print(json.dumps(found))
`;

/** `Line N: reason` for each aux call whose value is dropped (empty when main does not parse). */
export async function ignoredAuxCalls(main: string, sandbox: PythonSandbox): Promise<string[]> {
  if (!main.includes('aux')) return [];
  const run = await sandbox.run(ANALYZER, { stdin: JSON.stringify(main) });
  if (run.exitCode !== 0) throw new Error(`aux-usage analysis failed (exit ${run.exitCode ?? run.signal ?? run.killed}): ${run.stderr.slice(-300)}`);
  return JSON.parse(run.stdout) as string[];
}
