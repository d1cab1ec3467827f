// A node:test reporter (--test-reporter=./scripts/skip-reporter.mjs) that writes one JSON line per
// skipped test or suite: {"file", "name", "reason"}. scripts/skip-report.mjs reads it.
export default async function* skipReporter(source) {
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.skip !== undefined && event.data.skip !== false) {
      const { file, name, skip } = event.data;
      yield `${JSON.stringify({ file: file ?? null, name, reason: typeof skip === 'string' ? skip : '' })}\n`;
    }
  }
}
