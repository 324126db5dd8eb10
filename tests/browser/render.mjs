// Render in headless Chromium and report what a reader would see, as JSON; the Python tests assert on it.
//
//   node render.mjs mermaid BLOCKS.json RESULT.json SHOT.png   # BLOCKS.json: [{"code": ..., "caption": ...}, ...]
//   node render.mjs page PAGE.html RESULT.json SHOT.png
//
// `mermaid` renders every block with the pinned mermaid library (loaded from node_modules, never the network)
// and returns, per block, whether it rendered (an <svg>, no mermaid error) and the bounding box of every bar.
// `page` opens a file with every request intercepted and returns console errors, page errors and every request
// other than the page itself (a self-contained page makes none), and, per inline <svg> chart, the page box of every
// text label and every mark (lines, circles, rects, paths; a stroked shape's box grows by half its stroke width;
// shapes of class `grid` are background, not marks). The charts alone are also shot to SHOT-charts.png.
// The browser is $CHROME_PATH or /usr/bin/chromium.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const require = createRequire(import.meta.url);
const [mode, input, resultPath, shotPath] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROME_PATH || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"],
});

async function renderMermaid(page) {
  const blocks = JSON.parse(readFileSync(input, "utf8"));
  await page.setContent("<!doctype html><html><body style='font-family:sans-serif;width:900px'><main id='out'></main></body></html>");
  await page.addScriptTag({ path: require.resolve("mermaid/dist/mermaid.min.js") });
  const version = JSON.parse(readFileSync(require.resolve("mermaid/package.json"), "utf8")).version;
  const results = await page.evaluate(async (blocks) => {
    const mermaid = globalThis.mermaid;
    mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
    const out = document.getElementById("out");
    const found = [];
    for (const [i, block] of blocks.entries()) {
      const section = document.createElement("section");
      out.appendChild(section);
      const res = { index: i, rendered: false, error: null, bars: [] };
      try {
        const { svg } = await mermaid.render(`block${i}`, block.code);
        section.innerHTML = svg;
        const el = section.querySelector("svg");
        const failed = !el || el.getAttribute("aria-roledescription") === "error" || section.querySelector(".error-icon, .error-text");
        res.rendered = Boolean(el) && !failed;
        if (failed) res.error = section.textContent.slice(0, 300);
        for (const g of section.querySelectorAll("g[class*='bar-plot-']")) {
          for (const r of g.querySelectorAll("rect")) {
            const b = r.getBoundingClientRect();
            res.bars.push({ series: g.getAttribute("class"), x: b.x, y: b.y, width: b.width, height: b.height });
          }
        }
        res.lines = section.querySelectorAll("g[class*='line-plot-'] path").length;
      } catch (e) {
        res.error = String(e && e.message ? e.message : e);
      }
      const caption = document.createElement("p");
      caption.textContent = block.caption || "";
      section.appendChild(caption);
      found.push(res);
    }
    return found;
  }, blocks);
  return { mermaid_version: version, blocks: results };
}

async function openPage(page) {
  const requests = [];
  const consoleErrors = [];
  const pageErrors = [];
  const url = pathToFileURL(input).href;
  await page.setRequestInterception(true);
  page.on("request", (req) => {
    if (req.url() === url) return req.continue();
    requests.push(req.url());
    return req.abort();
  });
  page.on("console", (msg) => { if (msg.type() === "error") consoleErrors.push(msg.text()); });
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  await page.goto(url, { waitUntil: "load" });
  const info = await page.evaluate(() => ({
    title: document.title,
    svgs: document.querySelectorAll("svg").length,
    text: document.body.innerText,
    scripts: document.querySelectorAll("script").length,
    charts: [...document.querySelectorAll("svg")].map((svg) => {
      const box = (b, grow = 0) => ({ x: b.x - grow, y: b.y - grow, width: b.width + 2 * grow, height: b.height + 2 * grow });
      const labels = [...svg.querySelectorAll("text")].map((t) => ({
        text: [...t.childNodes].filter((c) => c.nodeName !== "title").map((c) => c.textContent).join("\n"),
        ...box(t.getBoundingClientRect()),
      }));
      const marks = [...svg.querySelectorAll("line, circle, ellipse, rect, path, polyline, polygon")]
        .filter((m) => !m.classList.contains("grid"))
        .map((m) => {
          const style = getComputedStyle(m);
          const grow = style.stroke === "none" ? 0 : parseFloat(style.strokeWidth) / 2;
          return { tag: m.tagName, ...box(m.getBoundingClientRect(), grow) };
        });
      return { label: svg.getAttribute("aria-label"), ...box(svg.getBoundingClientRect()), labels, marks };
    }),
  }));
  const charts = await page.$(".charts");
  if (charts && shotPath) await charts.screenshot({ path: shotPath.replace(/\.png$/, "-charts.png") });
  return { requests, console_errors: consoleErrors, page_errors: pageErrors, ...info };
}

try {
  const page = await browser.newPage();
  await page.setViewport({ width: 960, height: 800 });
  const result = mode === "mermaid" ? await renderMermaid(page) : await openPage(page);
  result.browser = await browser.version();
  if (shotPath) await page.screenshot({ path: shotPath, fullPage: true });
  writeFileSync(resultPath, JSON.stringify(result, null, 1));
} finally {
  await browser.close();
}
