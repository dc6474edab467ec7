/**
 * A loss curve as a small standalone SVG: training loss as a line, eval loss
 * as dots, step on x, loss on y (from the lowest to the highest value seen).
 */
import type { TrainHistoryEntry } from "@infer/core";

const WIDTH = 640;
const HEIGHT = 360;
const MARGIN = { left: 56, right: 16, top: 24, bottom: 36 };

const number = (value: number) => (Math.abs(value) >= 100 ? value.toFixed(0) : value.toPrecision(3));

export function lossCurveSvg(history: readonly TrainHistoryEntry[], title: string): string {
  const evals = history.filter((h) => h.evalLoss !== undefined && Number.isFinite(h.evalLoss));
  const values = [...history.map((h) => h.loss), ...evals.map((h) => h.evalLoss!)].filter(Number.isFinite);
  const low = values.length ? Math.min(...values) : 0;
  const high = values.length ? Math.max(...values) : 1;
  const span = high - low || 1;
  const lastStep = history.length ? history[history.length - 1]!.step : 1;
  const firstStep = history.length ? history[0]!.step : 0;
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (step: number) => MARGIN.left + (lastStep === firstStep ? plotWidth / 2 : ((step - firstStep) / (lastStep - firstStep)) * plotWidth);
  const y = (loss: number) => MARGIN.top + (1 - (loss - low) / span) * plotHeight;
  const point = (step: number, loss: number) => `${x(step).toFixed(1)},${y(loss).toFixed(1)}`;
  const line = history.filter((h) => Number.isFinite(h.loss)).map((h) => point(h.step, h.loss)).join(" ");
  const dots = evals.map((h) => `<circle cx="${x(h.step).toFixed(1)}" cy="${y(h.evalLoss!).toFixed(1)}" r="3" fill="#d95f02"/>`);
  const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const bottom = HEIGHT - MARGIN.bottom;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="16">${escape(title)}</text>`,
    `<path d="M${MARGIN.left},${MARGIN.top} V${bottom} H${WIDTH - MARGIN.right}" fill="none" stroke="#444"/>`,
    `<text x="${MARGIN.left - 6}" y="${MARGIN.top + 4}" text-anchor="end">${number(high)}</text>`,
    `<text x="${MARGIN.left - 6}" y="${bottom}" text-anchor="end">${number(low)}</text>`,
    `<text x="${MARGIN.left}" y="${bottom + 16}" text-anchor="middle">${firstStep}</text>`,
    `<text x="${WIDTH - MARGIN.right}" y="${bottom + 16}" text-anchor="end">step ${lastStep}</text>`,
    `<polyline points="${line}" fill="none" stroke="#1b9e77" stroke-width="1.5"><title>training loss</title></polyline>`,
    ...dots,
    `<text x="${WIDTH - MARGIN.right}" y="16" text-anchor="end"><tspan fill="#1b9e77">— training loss</tspan>${evals.length ? ' <tspan fill="#d95f02">● eval loss</tspan>' : ""}</text>`,
    "</svg>",
    "",
  ].join("\n");
}
