/**
 * Documentation markup to readable text, with regular expressions only (the corpus build stays
 * light): reStructuredText sources that Sphinx ships (`_sources/*.rst.txt`) and HTML pages.
 * Prose paragraphs are unwrapped to one line; code blocks keep their lines and indentation.
 */

const ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  mdash: '—',
  ndash: '–',
  hellip: '...',
  rsquo: "'",
  lsquo: "'",
  rdquo: '"',
  ldquo: '"',
  copy: '(c)',
  para: '¶',
  times: '×',
  rarr: '→',
  larr: '←',
  le: '≤',
  ge: '≥',
  ne: '≠',
  minus: '−',
  laquo: '«',
  raquo: '»',
  middot: '·',
  bull: '•',
  shy: '',
};

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) => {
    if (e[0] === '#') {
      const code = e[1] === 'x' || e[1] === 'X' ? Number.parseInt(e.slice(2), 16) : Number.parseInt(e.slice(1), 10);
      return code > 0 && code < 0x110000 ? String.fromCodePoint(code) : '';
    }
    return ENTITIES[e.toLowerCase()] ?? m;
  });
}

/** Joins the lines of each paragraph with spaces unless the paragraph is indented (code, tables). */
export function unwrapParagraphs(text: string): string {
  return text
    .split(/\n[ \t]*\n/)
    .map((p) => p.replace(/^\n+|\s+$/g, ''))
    .filter((p) => p.trim() !== '')
    .map((p) => {
      if (/^[ \t]/m.test(p) || /^\|/m.test(p)) return p;
      // A list: continuation lines join their item.
      if (/^[-*•+] /m.test(p)) return p.replace(/\s*\n\s*(?![-*•+] )/g, ' ').replace(/ {2,}/g, ' ');
      return p.replace(/\s+/g, ' ');
    })
    .join('\n\n');
}

const BLOCK_END = /<\/(?:p|div|h[1-6]|dd|dt|tr|table|pre|blockquote|section|ul|ol|dl|figure|caption|title)>|<br\s*\/?>|<hr[^>]*>/gi;

/**
 * An HTML page's text: `<head>`, scripts, styles and navigation dropped; block elements end
 * paragraphs; `<pre>` keeps its line breaks and indentation; entities decoded.
 */
export function htmlToText(html: string): string {
  let s = html.replace(/<!--[\s\S]*?-->/g, '');
  const body = /<body[^>]*>([\s\S]*)<\/body>/i.exec(s);
  if (body !== null) s = body[1];
  // Sphinx pages: the main column only (sidebars and related links repeat on every page).
  const main = /<div[^>]*role="main"[^>]*>([\s\S]*?)(?:<div class="sphinxsidebar"|<footer|$)/i.exec(s);
  if (main !== null) s = main[1];
  s = s.replace(/<div class="nav(?:header|footer)"[^>]*>[\s\S]*?<\/div>/gi, '').replace(/<a class="headerlink"[^>]*>[\s\S]*?<\/a>/gi, '');
  s = s.replace(/<(script|style|nav|header|footer|noscript|svg|form)\b[\s\S]*?<\/\1>/gi, '');
  const pres: string[] = [];
  s = s.replace(/<pre\b[^>]*>([\s\S]*?)<\/pre>/gi, (_, code: string) => {
    pres.push(decodeEntities(code.replace(/<[^>]+>/g, '')).replace(/\s+$/, ''));
    return `\n\n\uE000${pres.length - 1}\uE001\n\n`;
  });
  s = s
    .replace(/<li\b[^>]*>/gi, '\n- ')
    .replace(BLOCK_END, '\n\n')
    .replace(/<[^>]+>/g, '');
  s = decodeEntities(s)
    .split('\n')
    .map((l) => l.replace(/[ \t\u00a0]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n');
  s = unwrapParagraphs(s);
  // Code blocks go back in indented, so later unwrapping and cleaning leave them alone.
  return s.replace(/\uE000(\d+)\uE001/g, (_, i: string) =>
    pres[Number(i)]
      .split('\n')
      .map((l) => (l.trim() === '' ? '' : `    ${l}`))
      .join('\n'),
  );
}

/** Directives whose whole block (options and indented content) carries no prose. */
const VERSION_NOTES: Record<string, string> = { versionadded: 'New in version', versionchanged: 'Changed in version', deprecated: 'Deprecated since version' };

const DROP_DIRECTIVE =
  /^\.\. (?:index|toctree|highlight|highlightlang|module|currentmodule|testsetup|testcleanup|only|raw|image|figure|include|literalinclude|sectionauthor|moduleauthor|tabularcolumns|autosummary|automodule|autoclass|autofunction|contents|rubric|csv-table|list-table|table|glossary)::/;

/**
 * A reStructuredText source as text: section underlines, comments, labels and non-prose directives
 * dropped; roles (`:func:\`len\``) and inline markup (``code``, *emphasis*) reduced to their text;
 * `.. code-block::` and `::` literal blocks kept indented.
 */
export function rstToText(rst: string): string {
  const lines = rst.replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let dropIndent = -1;
  // Content of kept directives (`.. function::`) is dedented, so its prose unwraps like any other.
  const dedents: { base: number; by: number | null }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    const rawIndent = raw.length - raw.trimStart().length;
    if (raw.trim() !== '') while (dedents.length > 0 && rawIndent <= (dedents.at(-1) as { base: number }).base) dedents.pop();
    let cut = 0;
    for (const d of dedents) {
      if (d.by === null && raw.trim() !== '') d.by = rawIndent - d.base;
      cut += d.by ?? 0;
    }
    const line = raw.trim() === '' ? '' : raw.slice(Math.min(cut, rawIndent));
    const indent = line.length - line.trimStart().length;
    if (dropIndent >= 0) {
      if (line.trim() === '' || indent > dropIndent) continue;
      dropIndent = -1;
    }
    const t = line.trim();
    if (/^([=\-~^"'`#*+:.<>_])\1{2,}$/.test(t)) continue;
    if (DROP_DIRECTIVE.test(t) || /^\.\. _[^:]*:/.test(t) || (/^\.\.( |$)/.test(t) && !/^\.\. [\w-]+::/.test(t)) || /^\.\. \|/.test(t)) {
      dropIndent = indent;
      continue;
    }
    const directive = /^\.\. ([\w-]+)::\s*(.*)$/.exec(t);
    if (directive !== null) {
      const [, name, arg] = directive;
      const version = VERSION_NOTES[name];
      if (version !== undefined) out.push(`${' '.repeat(indent)}${version} ${arg.trim()}.`);
      else if (name === 'code-block' || name === 'code' || name === 'sourcecode' || name === 'doctest' || name === 'testcode')
        out.push(`${' '.repeat(indent)}::`);
      else if (arg !== '') out.push(`${' '.repeat(indent)}${name === 'note' || name === 'warning' ? `${name[0].toUpperCase()}${name.slice(1)}: ` : ''}${arg}`);
      else if (name === 'note' || name === 'warning' || name === 'seealso')
        out.push(`${' '.repeat(indent)}${name === 'seealso' ? 'See also' : `${name[0].toUpperCase()}${name.slice(1)}`}:`);
      // Skip the directive's option lines (`:noindex:`).
      while (i + 1 < lines.length && /^\s+:[\w-]+:/.test(lines[i + 1])) i++;
      if (!/^(?:code-block|code|sourcecode|doctest|testcode)$/.test(name)) dedents.push({ base: rawIndent, by: null });
      continue;
    }
    out.push(line);
  }
  const text = out
    .join('\n')
    .replace(/:pep:`(\d+)`/g, 'PEP $1')
    .replace(/:[\w:+-]+:`~?([^`<]*?)\s*<[^`>]*>`/g, '$1')
    .replace(/:[\w:+-]+:`[~!]?([^`]*)`/g, '$1')
    .replace(/``([^`]+)``/g, '$1')
    .replace(/`([^`<]+?)\s*<[^`>]+>`_{1,2}/g, '$1')
    .replace(/`([^`]+)`_{0,2}/g, '$1')
    .replace(/\*\*([^*\n]+)\*\*/g, '$1')
    .replace(/(^|[\s(])\*([^*\s][^*\n]*?)\*(?=[\s).,;:!?]|$)/gm, '$1$2')
    .replace(/([^:\s]):: *$/gm, '$1:')
    .replace(/^\s*:: *$/gm, '');
  return unwrapParagraphs(text);
}
