// A project member's flow through Horizon + magnum-ui in headless Chromium (playwright-core
// driving Debian's chromium): log in, pick the services region, create a cluster template and
// a cluster in the magnum-ui panels, wait for CREATE_COMPLETE in the list, open the cluster's
// detail page, delete the cluster, delete the template. A PNG per stage.
//
//   node flow.js        (run by crates/magnumd/tests/cli/horizon.rs, or by hand; see README.md)
// Environment:
//   HORIZON     Horizon's URL (http://127.0.0.1:18080)
//   REGION      the services region to switch to (required: the region of the Magnum under test)
//   OS_USER / OS_PASS   the persona (demo-member; OS_PASS required)
//   SHOTS       folder for the screenshots, api-calls.json, result.json (required)
//   TAG         suffix of the template and cluster names (a number from the clock)
//   IMAGE, KEYPAIR, FLAVOR, MASTER_FLAVOR, EXTERNAL_NETWORK   what the forms pick
//               (fedora-coreos-40, demo-key, m1.medium, m1.medium, public: test-support/openstack's seed;
//               magnum-ui offers only flavors of >= 2 vCPUs and 2048 MiB, so not m1.small)
//   SHIM_AZ     1 (default): fix magnum-ui's reading of the availability zones (README.md); 0: don't
//   AZ_FALLBACK the zone offered when Nova lists none (nova; empty: none)
//   CHROMIUM    the browser (/usr/bin/chromium); USER_DATA_DIR its profile folder (a fresh temp dir)
//   FLOW_TIMEOUT_S  the whole flow's limit (180)
// Exit 0 and "FLOW OK" when every stage passed; 1 and "FLOW FAILED at <stage>: <why>" otherwise,
// with NN-failure.png and failure.html. result.json says the same for a program.
'use strict';
const { chromium } = require('playwright-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

const need = (k) => {
  const v = process.env[k];
  if (!v) { console.error(`flow.js: ${k} is not set`); process.exit(2); }
  return v;
};
const H = (process.env.HORIZON || 'http://127.0.0.1:18080').replace(/\/$/, '');
const REGION = need('REGION');
const USER = process.env.OS_USER || 'demo-member';
const PASS = need('OS_PASS');
const SHOTS = need('SHOTS');
const TAG = process.env.TAG || String(Date.now() % 1000000);
const CT = `hz-ct-${TAG}`;
const CL = `hz-c-${TAG}`;
const IMAGE = process.env.IMAGE || 'fedora-coreos-40';
const KEYPAIR = process.env.KEYPAIR || 'demo-key';
const FLAVOR = process.env.FLAVOR || 'm1.medium';
const MASTER_FLAVOR = process.env.MASTER_FLAVOR || 'm1.medium';
const EXTNET = process.env.EXTERNAL_NETWORK || 'public';
const SHIM_AZ = (process.env.SHIM_AZ || '1') === '1';
const AZ_FALLBACK = process.env.AZ_FALLBACK === undefined ? 'nova' : process.env.AZ_FALLBACK;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const LIMIT_MS = Number(process.env.FLOW_TIMEOUT_S || 180) * 1000;
fs.mkdirSync(SHOTS, { recursive: true });

const t0 = Date.now();
const secs = () => ((Date.now() - t0) / 1000).toFixed(1);
const log = (...a) => console.log(`[${secs()}s]`, ...a);
const api = [];        // every /api/ call the browser made to Horizon, with its status
const timings = {};    // seconds per stage
const shims = [];      // what the browser-side workaround changed, per answer
const stages = [];     // stages passed
let current = null;
let shotNo = 0;

async function shot(page, name) {
  const f = path.join(SHOTS, `${String(++shotNo).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: f });
  log('screenshot', path.basename(f));
}

async function step(name, fn) {
  const s = Date.now();
  current = name;
  log('>>', name);
  await fn();
  timings[name] = (Date.now() - s) / 1000;
  stages.push(name);
}

// Angular selects carry values such as "string:kubernetes": pick by the visible label, once
// the options (filled by Glance/Nova/Neutron calls) are there.
async function pick(page, name, label) {
  const sel = page.locator(`.modal-dialog select[name="${name}"]`);
  await sel.waitFor({ state: 'visible' });
  await page.waitForFunction(([n, l]) => {
    const s = document.querySelector(`.modal-dialog select[name="${n}"]`);
    return s && [...s.options].some((o) => o.label.trim() === l || o.text.trim() === l);
  }, [name, label], { timeout: 20000 });
  await sel.selectOption({ label });
}

async function tab(page, title) {
  await page.locator('.modal-dialog .wizard-nav a, .modal-dialog .nav a').filter({ hasText: title }).first().click();
}

async function toast(page) {
  const t = page.locator('.toast, .alert-success, .alert-danger').first();
  try {
    await t.waitFor({ state: 'visible', timeout: 10000 });
    return (await t.innerText()).trim().replace(/\s+/g, ' ');
  } catch { return null; }
}

// Horizon's tables do not poll: reload until pred() holds.
async function reloadUntil(page, url, pred, what, timeoutMs = 60000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    await page.goto(url);
    await page.waitForSelector('hz-resource-table, table', { timeout: 20000 });
    await page.waitForTimeout(1000);
    if (await pred()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(500);
  }
}

async function submit(page, what) {
  const b = page.locator('.modal-footer button.btn-primary');
  await b.waitFor();
  if (await b.isDisabled()) throw new Error(`${what}: Submit is disabled (the form is invalid)`);
  await b.click();
  const said = await toast(page);
  log('toast:', said);
  if (said && /error|unable/i.test(said)) throw new Error(`${what}: ${said}`);
  await page.waitForSelector('.modal-dialog', { state: 'detached', timeout: 20000 }).catch(() => {});
}

async function deleteRow(page, url, name, button, shotName) {
  await page.goto(url);
  await page.waitForSelector(`tr:has-text("${name}")`);
  // Horizon's "themable" checkbox: the <input> is hidden and its <label> takes the click
  await page.locator(`tr:has-text("${name}") td.multi_select_column label`).first().click();
  await page.click(`button:has-text("${button}")`);
  await page.waitForSelector('.modal.in .modal-footer .btn-danger');
  await page.waitForTimeout(500); // the dialog fades in
  await shot(page, shotName);
  await page.locator('.modal-footer .btn-danger').first().click();
  const said = await toast(page);
  log('toast:', said);
  if (said && /error|unable/i.test(said)) throw new Error(`${button}: ${said}`);
}

async function flow(page) {
  await step('login', async () => {
    await page.goto(H + '/auth/login/');
    await shot(page, 'login-page');
    await page.fill('#id_username', USER);
    await page.fill('#id_password', PASS);
    await Promise.all([page.waitForNavigation(), page.click('#loginBtn')]);
    if (page.url().includes('/auth/login')) throw new Error('login failed: ' + (await page.innerText('body')).slice(0, 300));
    log('logged in as', USER, 'in services region', (await page.textContent('.context-region')).trim());
  });

  await step('region', async () => {
    if ((await page.textContent('.context-region')).trim() !== REGION) {
      await page.click('.context-overview');
      await Promise.all([page.waitForNavigation(),
        page.click(`a[href^="/auth/switch_services_region/${REGION}/"]`)]);
    }
    const now = (await page.textContent('.context-region')).trim();
    if (now !== REGION) throw new Error(`services region is ${now}, wanted ${REGION}`);
    await shot(page, 'overview-in-region');
  });

  await step('template-list', async () => {
    await page.goto(H + '/project/cluster_templates/');
    await page.waitForSelector('hz-resource-table');
    await page.waitForTimeout(1000);
    await shot(page, 'cluster-templates-list');
  });

  await step('template-create', async () => {
    await page.click('button:has-text("Create Cluster Template")');
    await page.waitForSelector('.modal-dialog #name');
    await page.fill('.modal-dialog #name', CT);
    await pick(page, 'coe', 'Kubernetes');
    await shot(page, 'template-form-info');
    await tab(page, 'Node Spec');
    await pick(page, 'image_id', IMAGE);
    await pick(page, 'keypair_id', KEYPAIR);
    await pick(page, 'flavor_id', FLAVOR);
    await pick(page, 'master_flavor_id', MASTER_FLAVOR);
    await shot(page, 'template-form-node-spec');
    await tab(page, 'Network');
    await pick(page, 'external_network_id', EXTNET);
    await shot(page, 'template-form-network');
    await submit(page, 'Create Cluster Template');
    await page.waitForTimeout(1000);
    await shot(page, 'template-created');
  });

  await step('template-in-list', async () => {
    await reloadUntil(page, H + '/project/cluster_templates/',
      async () => (await page.locator(`tr:has-text("${CT}")`).count()) > 0, 'the template row');
    await shot(page, 'cluster-templates-list-with-new');
  });

  await step('cluster-create', async () => {
    await page.goto(H + '/project/clusters/');
    await page.waitForSelector('hz-resource-table');
    await page.waitForTimeout(1000);
    await shot(page, 'clusters-list-empty');
    await page.click('button:has-text("Create Cluster")');
    await page.waitForSelector('.modal-dialog #name');
    await page.fill('.modal-dialog #name', CL);
    await pick(page, 'cluster_template_id', CT);
    // the zone and the keypair are preselected when there is one of each
    for (const [n, l] of [['availability_zone', AZ_FALLBACK || 'nova'], ['keypair', KEYPAIR]]) {
      const v = await page.locator(`.modal-dialog select[name="${n}"]`).inputValue().catch(() => '');
      if (!v || v === '?' || v === 'string:' || v.includes('undefined')) await pick(page, n, l);
    }
    await shot(page, 'cluster-form-details');
    await tab(page, 'Size');
    // a template without a master load balancer fixes the control plane at 1 (read-only)
    const mc = page.locator('.modal-dialog input[name="master_count"]');
    if (await mc.isEditable()) await mc.fill('1');
    await pick(page, 'master_flavor_id', MASTER_FLAVOR);
    await page.fill('.modal-dialog input[name="node_count"]', '1');
    await pick(page, 'flavor_id', FLAVOR);
    await shot(page, 'cluster-form-size');
    await tab(page, 'Network');
    await shot(page, 'cluster-form-network');
    await submit(page, 'Create Cluster');
    await page.waitForTimeout(1000);
    await shot(page, 'cluster-created');
  });

  await step('cluster-complete', async () => {
    let row = '';
    await reloadUntil(page, H + '/project/clusters/', async () => {
      const r = page.locator(`tr:has-text("${CL}")`).first();
      if (!(await r.count())) return false;
      row = (await r.innerText()).replace(/\s+/g, ' ');
      return /CREATE_COMPLETE|FAILED/.test(row);
    }, 'CREATE_COMPLETE');
    log('row:', row);
    await shot(page, 'clusters-list-create-complete');
    if (!/CREATE_COMPLETE/.test(row)) throw new Error('the cluster did not reach CREATE_COMPLETE: ' + row);
  });

  await step('cluster-detail', async () => {
    await page.locator(`tr:has-text("${CL}") a:has-text("${CL}")`).first().click();
    // an Angular route change (pushState): no load event, so wait for the location
    await page.waitForFunction(() => /\/ngdetails\/OS::Magnum::Cluster\/[0-9a-f-]{36}/.test(decodeURIComponent(location.pathname)),
      null, { timeout: 20000 });
    await page.waitForSelector(`text=${CL}`);
    await page.waitForSelector('text=CREATE_COMPLETE', { timeout: 20000 });
    await page.waitForTimeout(1500);
    await shot(page, 'cluster-detail');
    fs.writeFileSync(path.join(SHOTS, 'cluster-detail.txt'), await page.innerText('body'));
    log('detail page', decodeURIComponent(new URL(page.url()).pathname));
  });

  await step('cluster-delete', async () => {
    await deleteRow(page, H + '/project/clusters/', CL, 'Delete Clusters', 'cluster-delete-confirm');
    await page.waitForTimeout(500);
    await shot(page, 'cluster-delete-requested');
    await reloadUntil(page, H + '/project/clusters/',
      async () => (await page.locator(`tr:has-text("${CL}")`).count()) === 0, 'the cluster to go');
    await shot(page, 'clusters-list-after-delete');
  });

  await step('template-delete', async () => {
    await deleteRow(page, H + '/project/cluster_templates/', CT, 'Delete Cluster Templates', 'template-delete-confirm');
    await reloadUntil(page, H + '/project/cluster_templates/',
      async () => (await page.locator(`tr:has-text("${CT}")`).count()) === 0, 'the template to go');
    await shot(page, 'cluster-templates-list-after-delete');
  });
}

(async () => {
  const udd = process.env.USER_DATA_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'hz-chromium-'));
  fs.mkdirSync(udd, { recursive: true });
  // The flags this machine needs: no sandbox as root, and nothing that phones out (the
  // network is closed; Chromium's background connections would only fail).
  const ctx = await chromium.launchPersistentContext(udd, {
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1400, height: 900 },
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(30000);
  page.on('response', async (r) => {
    const u = r.url();
    if (!u.startsWith(H + '/api/')) return;
    const e = { t: Number(secs()), stage: current, method: r.request().method(), url: u.slice(H.length), status: r.status() };
    // what magnum-ui sent (the login form is not an /api/ call: no password here)
    if (e.method !== 'GET' && r.request().postData()) e.request = r.request().postData().slice(0, 2000);
    // and what came back from magnumd through Horizon, for the writes
    if (e.method !== 'GET' && r.status() < 400) { try { e.response = (await r.text()).slice(0, 4000); } catch { /* none */ } }
    if (r.status() >= 400) {
      try { e.body = (await r.text()).slice(0, 1000); } catch { /* gone with the page */ }
      log('API', e.status, e.method, e.url, e.body || '');
    }
    api.push(e);
  });
  if (SHIM_AZ) {
    // magnum-ui 19 reads each zone's `zoneName` (novaclient's field); Horizon 27 lists zones
    // with openstacksdk, whose items carry `name`. And Nova lists no zone at all while it has
    // no compute service. Fix that one answer in the browser: copy name to zoneName, and offer
    // AZ_FALLBACK when the list is empty. Everything magnum-ui sends is then its own.
    await page.route('**/api/nova/availzones/**', async (route) => {
      const resp = await route.fetch();
      const body = await resp.json();
      const items = body.items || [];
      const change = { nova: JSON.stringify(items) };
      for (const z of items) if (z.zoneName === undefined && z.name !== undefined) z.zoneName = z.name;
      if (!items.length && AZ_FALLBACK) items.push({ zoneName: AZ_FALLBACK, zoneState: { available: true } });
      body.items = items;
      change.browser = JSON.stringify(items);
      if (!shims.some((s) => s.nova === change.nova)) { shims.push(change); log('AZ shim:', change.nova, '->', change.browser); }
      await route.fulfill({ response: resp, json: body });
    });
  }
  page.on('pageerror', (e) => log('pageerror', String(e).slice(0, 300)));

  let error = null;
  const limit = setTimeout(() => { log(`FLOW FAILED: over ${LIMIT_MS / 1000}s`); process.exit(1); }, LIMIT_MS);
  try {
    await flow(page);
  } catch (e) {
    error = `${current}: ${e.message.split('\n')[0]}`;
    await shot(page, 'failure').catch(() => {});
    fs.writeFileSync(path.join(SHOTS, 'failure.html'), await page.content().catch(() => ''));
  }
  clearTimeout(limit);
  await ctx.close().catch(() => {});
  if (!process.env.USER_DATA_DIR) fs.rmSync(udd, { recursive: true, force: true });
  const bad = api.filter((a) => a.status >= 400);
  const result = { ok: !error, error, stages, timings, total_s: Number(secs()), template: CT, cluster: CL,
    az_shim: shims, api_calls: api.length, api_errors: bad };
  fs.writeFileSync(path.join(SHOTS, 'api-calls.json'), JSON.stringify(api, null, 1));
  fs.writeFileSync(path.join(SHOTS, 'result.json'), JSON.stringify(result, null, 1));
  log(`browser -> Horizon /api/ calls: ${api.length}, with 4xx/5xx: ${bad.length}`);
  for (const b of bad) log('  ', b.status, b.method, b.url);
  log('timings', JSON.stringify(timings));
  log(error ? `FLOW FAILED at ${error}` : 'FLOW OK');
  process.exit(error ? 1 : 0);
})();
