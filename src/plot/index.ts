/**
 * Line charts for training curves: a Vega-Lite spec rendered to SVG headlessly by vega (no canvas,
 * no network), and SVG rasterised to PNG by resvg (a prebuilt binary shipped in its npm package).
 */
import { Resvg } from '@resvg/resvg-js';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

export interface Series {
  name: string;
  /** [x, y] points; non-finite values are dropped. */
  points: readonly (readonly [number, number])[];
  /** Also draw a dot at every point (sparse series, e.g. periodic validation). */
  markers?: boolean;
}

export interface LineChartOptions {
  title: string;
  series: readonly Series[];
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
  /** Log-scale y axis (losses spanning orders of magnitude). */
  logY?: boolean;
}

/** The Vega-Lite spec of a multi-series line chart (one colour per series, legend on the right). */
export function lineChartSpec(o: LineChartOptions): TopLevelSpec {
  const values = o.series.flatMap((s) =>
    s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)).map(([x, y]) => ({ x, y, series: s.name, marker: s.markers === true })),
  );
  return {
    title: o.title,
    width: o.width ?? 640,
    height: o.height ?? 320,
    background: 'white',
    data: { values },
    encoding: {
      x: { field: 'x', type: 'quantitative', title: o.xLabel },
      y: { field: 'y', type: 'quantitative', title: o.yLabel, scale: o.logY ? { type: 'log' } : { zero: false } },
      color: { field: 'series', type: 'nominal', title: null, sort: o.series.map((s) => s.name), legend: { labelLimit: 0 } },
    },
    layer: [{ mark: { type: 'line', strokeWidth: 1.5 } }, { mark: { type: 'point', filled: true, size: 30 }, transform: [{ filter: 'datum.marker' }] }],
  };
}

/** Renders the chart as a standalone SVG document. */
export async function lineChart(o: LineChartOptions): Promise<string> {
  const view = new View(parse(compile(lineChartSpec(o)).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Rasterises an SVG to PNG bytes at `scale`× its size, with the system's fonts. */
export function svgToPng(svg: string, scale = 2): Buffer {
  return new Resvg(svg, { fitTo: { mode: 'zoom', value: scale }, font: { loadSystemFonts: true } }).render().asPng();
}

/** Stacks standalone SVG charts vertically into one SVG document (e.g. reward above fluency). */
export function stackCharts(svgs: readonly string[]): string {
  const size = (svg: string, attr: 'width' | 'height') => Number(new RegExp(`<svg[^>]*\\s${attr}="([\\d.]+)"`).exec(svg)?.[1] ?? 0);
  let y = 0;
  const parts = svgs.map((svg) => {
    const body = svg.replace(/^<\?xml[^>]*>\s*/, '').replace(/<svg/, `<svg y="${y}"`);
    y += size(svg, 'height');
    return body;
  });
  const width = Math.max(...svgs.map((s) => size(s, 'width')));
  return `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="${width}" height="${y}" viewBox="0 0 ${width} ${y}"><rect width="100%" height="100%" fill="white"/>${parts.join('')}</svg>`;
}
