import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lineChart, lineChartSpec, svgToPng } from '../../src/plot/index.js';

const chart = {
  title: 'pretraining loss',
  series: [
    { name: 'train loss', points: Array.from({ length: 50 }, (_, i) => [i + 1, 8 - Math.log1p(i)] as [number, number]) },
    {
      name: 'validation loss',
      points: [
        [10, 6.5],
        [20, 5.9],
        [30, Number.NaN],
        [40, 5.2],
      ] as [number, number][],
      markers: true,
    },
  ],
  xLabel: 'optimizer step',
  yLabel: 'nats / token',
};

test('lineChart renders a standalone SVG with title, axis labels and one legend entry per series', async () => {
  const svg = await lineChart(chart);
  assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  assert.match(svg, /<\/svg>\s*$/);
  for (const text of ['pretraining loss', 'optimizer step', 'nats / token', 'train loss', 'validation loss']) assert.ok(svg.includes(text), text);
  // One line per series, and markers only on the validation series (its NaN point dropped).
  assert.equal((svg.match(/aria-roledescription="line mark"/g) ?? []).length, 2);
  assert.equal((svg.match(/aria-roledescription="point"/g) ?? []).length, 3);
});

test('non-finite points are dropped from the data', () => {
  const spec = lineChartSpec(chart) as { data: { values: { x: number; y: number; series: string }[] } };
  assert.equal(spec.data.values.length, 50 + 3);
  assert.ok(spec.data.values.every((v) => Number.isFinite(v.y)));
});

test('svgToPng rasterises to a PNG of the expected size', async () => {
  const png = svgToPng(await lineChart(chart), 2);
  assert.equal(png.subarray(0, 8).toString('hex'), '89504e470d0a1a0a');
  assert.ok(png.length > 20_000, `PNG is only ${png.length} bytes`);
  // IHDR width/height (big-endian at bytes 16..24): twice the SVG's size.
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  assert.ok(width > 1280 && width < 2400, `width ${width}`);
  assert.ok(height > 640 && height < 1200, `height ${height}`);
});
