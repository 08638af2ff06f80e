// Caddy Gateway admin dashboard: a dependency-free single-page application
// on top of the admin API of the same origin.
'use strict';
(function () {
  const TOKEN_KEY = 'gateway_admin_token';
  const S = { status: null, me: null, token: sessionStorage.getItem(TOKEN_KEY) || '', es: null, log: [], paused: false, timer: null, view: '' };
  const main = document.getElementById('main');

  // ---- helpers ---------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (tag === 'form') e.noValidate = true; // every error is shown at its field (submit listener below)
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'className' || k === 'textContent' || k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden') e[k] = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  const txt = (tag, s, cls) => h(tag, { textContent: s, className: cls || '' });
  const fmtNum = n => (n === null || n === undefined) ? '–' : Number(n).toLocaleString('en-US', { maximumFractionDigits: 2 });
  const fmtTime = t => { if (!t) return '–'; const d = new Date(t); return isNaN(d) ? t : d.toLocaleTimeString(); };
  const list = s => String(s || '').split(',').map(x => x.trim()).filter(Boolean);
  const canEdit = () => S.me && S.me.role !== 'viewer';
  const isAdmin = () => S.me && S.me.role === 'admin';
  const chips = a => (a && a.length) ? a.map(x => txt('span', x, 'chip mono')) : [txt('span', 'any', 'off')];

  class APIError extends Error { constructor(status, msg) { super(msg); this.status = status; } }

  async function api(method, path, body) {
    return (await request(method, path, body)).data;
  }

  // request is api answering the response too (its headers).
  async function request(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (S.token) headers.Authorization = 'Bearer ' + S.token;
    // The server's CSRF rule for cookie sessions: mutations are JSON.
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    const resp = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
    let data = null;
    const ct = resp.headers.get('Content-Type') || '';
    if (ct.includes('json')) { try { data = await resp.json(); } catch (e) { data = null; } }
    if (!resp.ok) {
      const msg = (data && data.error) || (resp.status + ' ' + resp.statusText);
      if (resp.status === 401 && S.me && !path.startsWith('/api/v1/auth/')) { S.me = null; showLogin('Your session has ended: please sign in again.'); }
      throw new APIError(resp.status, msg);
    }
    return { data, resp };
  }

  // page reads one page of a list (?limit=&offset=): its items and the
  // number of items in all (X-Total-Count).
  async function page(path, offset, limit) {
    const { data, resp } = await request('GET', path + '?limit=' + limit + '&offset=' + offset);
    return { items: data || [], total: Number(resp.headers.get('X-Total-Count') || 0) };
  }

  // save creates a resource of collection (POST) or, when it exists,
  // replaces it (PUT collection/id).
  function save(collection, existing, body) {
    return existing ? api('PUT', collection + '/' + existing.id, body) : api('POST', collection, body);
  }

  // openForm shows form f in box under "New <thing>" or "Edit <thing> #id",
  // with the field named focus (if any) focused.
  function openForm(box, f, thing, existing, focus) {
    box.replaceChildren(txt('h3', existing ? 'Edit ' + thing + ' #' + existing.id : 'New ' + thing), f);
    box.hidden = false;
    if (focus) f.elements[focus].focus();
  }

  // formActions is a form's submit button (label) and a Cancel button
  // that closes box, in a row (className) with any extra children.
  function formActions(box, label, className = 'row wide', ...extra) {
    return h('div', { className }, h('button', { type: 'submit', className: 'primary' }, label),
      h('button', { type: 'button', onclick: () => { box.hidden = true; } }, 'Cancel'), ...extra);
  }

  // Runs an action of a form: shows {error} next to it, disables the button.
  async function guard(errBox, btn, fn) {
    errBox.textContent = '';
    if (btn) btn.disabled = true;
    const form = errBox.closest('form');
    if (form) clearFieldErrors(form);
    try { return await fn(); } catch (e) {
      errBox.textContent = e.message || String(e);
      if (form) apiFieldError(form, e.message);
      return undefined;
    } finally { if (btn) btn.disabled = false; }
  }
  // deleteBtn is a row's Delete button (made by btn: mutBtn, hidden from
  // viewers, or admBtn): it asks to confirm deleting what, deletes path (an
  // error shows in errBox), then calls after with the answer (undefined
  // after an error).
  function deleteBtn(errBox, what, path, after, btn = mutBtn) {
    return btn('Delete', 'small danger', async () => {
      if (!window.confirm('Delete ' + what + '?')) return;
      after(await guard(errBox, null, () => api('DELETE', path)));
    });
  }
  function field(label, input, cls) { return h('label', { className: cls || '' }, label, input); }
  function check(label, name, checked) { return h('label', { className: 'check' }, h('input', { type: 'checkbox', name, checked: !!checked }), label); }
  // serviceOptions are the choices of a service select: "name (#id)".
  const serviceOptions = svcs => svcs.map(s => [s.id, s.name + ' (#' + s.id + ')']);
  // serviceName is the name of service id among svcs ("#id" when absent).
  const serviceName = (svcs, id) => { const s = svcs.find(x => x.id === id); return s ? s.name : '#' + id; };
  function select(name, options, value) {
    return h('select', { name }, options.map(o => { const [v, l] = Array.isArray(o) ? o : [o, o]; return h('option', { value: String(v), textContent: l, selected: String(v) === String(value ?? '') }); }));
  }
  const num = (form, name) => { const v = form.elements[name].value.trim(); return v === '' ? undefined : Number(v); };
  const str = (form, name) => form.elements[name].value.trim();
  const bool = (form, name) => form.elements[name].checked;
  function mutBtn(label, cls, onclick) { return h('button', { type: 'button', className: 'mut ' + (cls || ''), onclick, disabled: !canEdit() }, label); }
  // An action of the admin role only: hidden for editors and viewers.
  function admBtn(label, cls, onclick) { return h('button', { type: 'button', className: 'mut adm ' + (cls || ''), onclick, disabled: !isAdmin() }, label); }
  function statusClass(s) { return 's' + String(s || 0)[0]; }

  // ---- sign-in ---------------------------------------------------------
  async function boot() {
    const params = new URLSearchParams(location.search);
    const ssoError = params.get('sso_error');
    if (ssoError !== null) history.replaceState(null, '', location.pathname + location.hash);
    try { S.status = await api('GET', '/api/v1/admin/status'); } catch (e) { main.replaceChildren(txt('p', 'The admin API does not answer: ' + e.message, 'err')); return; }
    if (!S.status.auth_enabled) { S.me = { role: 'admin', method: 'open', user: null }; return enter(); }
    try { S.me = await api('GET', '/api/v1/auth/me'); return enter(); } catch (e) {
      if (S.token && e.status === 401) { S.token = ''; sessionStorage.removeItem(TOKEN_KEY); }
      // Anyone can send a link with ?sso_error=: only a reason code of the
      // form the gateway sends (a provider error code or its own) is shown,
      // never a sentence someone chose to show on the sign-in page.
      const reason = /^[A-Za-z0-9_.-]{1,64}$/.test(ssoError || '') ? ssoError : 'unknown reason';
      showLogin(ssoError !== null ? 'Single sign-on failed: ' + reason : '');
    }
  }

  function showLogin(message) {
    stopTimers();
    const ob = document.getElementById('open-banner'); if (ob) ob.remove();
    if (S.es) { S.es.close(); S.es = null; }
    document.getElementById('nav').hidden = true;
    document.getElementById('who').replaceChildren();
    const err = txt('div', message || '', 'err');
    const form = h('form', { id: 'login-form' },
      field('E-mail', h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true })),
      field('Password', h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true })),
      h('button', { className: 'primary', type: 'submit' }, 'Sign in'));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      guard(err, form.querySelector('button'), async () => {
        S.token = ''; sessionStorage.removeItem(TOKEN_KEY);
        S.me = await api('POST', '/api/v1/auth/login', { email: str(form, 'email'), password: form.elements.password.value });
        enter();
      });
    });
    const tform = h('form', { id: 'token-form' },
      field('Admin token', h('input', { type: 'password', name: 'token', autocomplete: 'off', placeholder: '64 hex characters', required: true })),
      h('button', { type: 'submit' }, 'Use token'));
    tform.addEventListener('submit', ev => {
      ev.preventDefault();
      guard(err, tform.querySelector('button'), async () => {
        S.token = str(tform, 'token');
        try { S.me = await api('GET', '/api/v1/auth/me'); } catch (e) { S.token = ''; throw e; }
        sessionStorage.setItem(TOKEN_KEY, S.token);
        enter();
      });
    });
    const sso = S.status && S.status.sso && S.status.sso.enabled;
    main.replaceChildren(h('div', { className: 'login' }, h('div', { className: 'panel' },
      txt('h2', 'Sign in'),
      sso ? h('button', { type: 'button', className: 'sso primary', id: 'sso-button', onclick: () => { location.href = '/api/v1/auth/sso/start'; } }, S.status.sso.label || 'Sign in with SSO') : null,
      sso ? txt('div', 'or', 'or') : null,
      form, err, txt('div', 'or', 'or'), tform,
      h('p', { className: 'muted hint' }, 'The token is kept in this browser tab only (sessionStorage). API reference: ', h('a', { href: '/docs' }, '/docs')))));
  }

  // signOut ends the session on the server before it says so: the cookie
  // is HttpOnly, so only the server's answer ends it. A refused or failed
  // logout (403, 503, no network) leaves the session valid, and the page
  // stays signed in and says so; a 401 means the session had already ended.
  async function signOut() {
    if (S.token) { S.token = ''; sessionStorage.removeItem(TOKEN_KEY); } else {
      const old = document.getElementById('signout-error'); if (old) old.remove();
      try { await api('POST', '/api/v1/auth/logout'); } catch (e) {
        if (e.status !== 401) {
          document.getElementById('who').append(h('span', { className: 'err', id: 'signout-error', role: 'alert' }, 'Sign-out failed, you are still signed in: ' + (e.message || String(e))));
          return;
        }
      }
    }
    S.me = null;
    showLogin('Signed out.');
  }

  function enter() {
    document.body.classList.toggle('ro', !canEdit());
    document.body.classList.toggle('na', !isAdmin());
    const who = document.getElementById('who');
    const name = S.me.user ? (S.me.user.name || S.me.user.email) : (S.me.method === 'token' ? 'admin token' : 'open mode');
    who.replaceChildren(h('span', { id: 'whoami' }, name + ' · ' + S.me.role));
    if (S.me.method === 'session') who.append(h('a', { href: '#account', id: 'account-link' }, h('button', { type: 'button', className: 'small' }, 'Password')));
    if (S.status.auth_enabled) who.append(h('button', { type: 'button', className: 'small', id: 'signout', onclick: signOut }, 'Sign out'));
    document.getElementById('nav').hidden = false;
    openBanner();
    startEvents();
    route();
  }

  // While no admin user exists and no token is set, anyone who reaches the
  // admin listener is admin: say so on every page.
  function openBanner() {
    let b = document.getElementById('open-banner');
    if (S.me && S.me.method === 'open') {
      if (!b) {
        b = h('div', { className: 'banner', id: 'open-banner', role: 'alert' },
          h('strong', {}, 'The admin API is open.'),
          txt('span', 'Anyone who can reach ' + location.host + ' can change the gateway: no admin user or token exists yet.'),
          h('a', { href: '#users/new', id: 'open-banner-link' }, h('button', { type: 'button', className: 'primary small' }, 'Create the first admin')));
        document.querySelector('header.top').after(b);
      }
    } else if (b) b.remove();
  }

  // ---- live events ----------------------------------------------------
  function startEvents() {
    if (S.es) S.es.close();
    api('GET', '/api/v1/requests?limit=100').then(rs => { const seen = new Set(S.log.map(r => r.id)); S.log = S.log.concat(rs.filter(r => !seen.has(r.id))).sort((a, b) => b.id - a.id).slice(0, 500); renderLogRows(); }).catch(() => {});
    const url = '/api/v1/events' + (S.token ? '?access_token=' + encodeURIComponent(S.token) : '');
    const es = new EventSource(url, { withCredentials: true });
    S.es = es;
    es.onopen = () => setLive('live');
    es.onerror = () => setLive(es.readyState === EventSource.CLOSED ? 'down' : 'reconnecting');
    es.onmessage = ev => {
      let r; try { r = JSON.parse(ev.data); } catch (e) { return; }
      if (S.log.length && S.log.some(x => x.id === r.id)) return;
      histAdd(r);
      if ((r.route_id !== null && !N.routes.has(r.route_id)) || (r.consumer_id !== null && !N.consumers.has(r.consumer_id))) loadNames().then(renderLogRows);
      S.log.unshift(r);
      if (S.log.length > 500) S.log.length = 500;
      if (!S.paused) renderLogRows();
    };
  }
  function setLive(state) {
    S.live = state;
    const e = document.getElementById('live-state');
    if (e) { e.className = 'state ' + state; e.textContent = state; }
  }

  // ---- names: routes, services and consumers by name, with links -----------------
  // A cache of the names, refreshed at most every 10 s (or when asked): the
  // first NAMES_PAGE of each kind. A gateway with more (tens of thousands
  // of routes: the whole list is megabytes and seconds of the server's
  // work, every 10 s while the overview is open) has the names of the
  // others looked up one by one as links to them are shown (N.partial).
  const NAMES_PAGE = 1000;
  const N = { routes: new Map(), services: new Map(), consumers: new Map(), at: 0, partial: {}, pending: new Map() };
  async function loadNames(force) {
    if (!force && Date.now() - N.at < 10000) return;
    N.at = Date.now();
    const kinds = [['routes', 'name'], ['services', 'name'], ['consumers', 'username']];
    const pages = await Promise.all(kinds.map(([k]) => page('/api/v1/' + k, 0, NAMES_PAGE).catch(() => ({ items: [], total: 0 }))));
    kinds.forEach(([k, field], i) => {
      const known = new Map(pages[i].items.map(x => [x.id, x[field]]));
      // Names looked up one by one stay known beyond the first page.
      if (pages[i].total > NAMES_PAGE) for (const [id, n] of N[k]) if (!known.has(id)) known.set(id, n);
      N[k] = known;
      N.partial[k] = pages[i].total > NAMES_PAGE;
    });
  }
  // lookUpName fetches the name of one route, service or consumer beyond
  // the cached page, then sets it on el (and on the other links waiting
  // for it).
  function lookUpName(kind, id, el) {
    const key = kind + '/' + id;
    if (N.pending.has(key)) { N.pending.get(key).push(el); return; }
    N.pending.set(key, [el]);
    api('GET', '/api/v1/' + key).then(x => {
      const n = kind === 'consumers' ? x.username : x.name;
      N[kind].set(id, n);
      for (const e of N.pending.get(key)) if (e.isConnected) e.textContent = n;
    }).catch(() => {}).finally(() => N.pending.delete(key));
  }
  // A link to a route, service or consumer (#routes/12 selects its row).
  function ref(kind, id, name) {
    if (id === null || id === undefined) return txt('span', '–', 'off');
    const n = name || N[kind].get(id);
    const a = h('a', { href: '#' + kind + '/' + id, className: 'ref', title: kind.slice(0, -1) + ' #' + id }, n || '#' + id);
    if (!n && N.partial[kind]) lookUpName(kind, id, a);
    return a;
  }
  // Marks the row of the focused id (#view/id) and scrolls to it.
  function focusRow(table) {
    if (!S.focus || !table) return;
    const tr = table.querySelector('tr[data-id="' + CSS.escape(S.focus) + '"]');
    if (tr) { tr.classList.add('sel'); tr.scrollIntoView({ block: 'nearest' }); }
  }

  // ---- traffic charts: GET /api/v1/metrics/history, kept live by the event stream ----
  const SVGNS = 'http://www.w3.org/2000/svg';
  function sv(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
    for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  const CLASSES = ['2xx', '3xx', '1xx', '4xx', '5xx']; // stacked bottom up
  const CLASS_COLOR = { '2xx': '#2e9d5b', '3xx': '#2f7ed8', '1xx': '#9aa3ad', '4xx': '#d69e2e', '5xx': '#c9423a' };
  const PCT_COLOR = { p50: '#2f7ed8', p95: '#d69e2e', p99: '#c9423a' };
  // H.data is the history; H.seen the latencies of each step that the page
  // got from the event stream (for the live step's percentiles).
  const H = { data: null, seen: new Map(), pending: false };
  async function loadHistory() {
    const d = await api('GET', '/api/v1/metrics/history');
    H.data = d; H.seen = new Map();
    drawCharts();
  }
  const stepMs = () => H.data.step_s * 1000;
  function emptyPoint(t) {
    return { time: new Date(t).toISOString(), requests: 0, unmatched: 0, status: { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 }, latency_ms: { p50: 0, p95: 0, p99: 0 }, routes: [], consumers: [], live: true };
  }
  // Adds a record of the event stream to its step (records the history
  // already counts, id <= last_id, are skipped).
  function histAdd(r) {
    const d = H.data;
    if (!d || r.id <= d.last_id) return;
    const sm = stepMs(), t = Math.floor(new Date(r.time).getTime() / sm) * sm;
    let last = d.points[d.points.length - 1];
    if (!last) { last = emptyPoint(t); d.points.push(last); }
    while (new Date(last.time).getTime() < t) { last = emptyPoint(new Date(last.time).getTime() + sm); d.points.push(last); }
    if (d.points.length > d.max_points) d.points.splice(0, d.points.length - d.max_points);
    const p = d.points.find(x => new Date(x.time).getTime() === t);
    if (!p) return;
    p.requests++;
    if (r.route_id === null) p.unmatched++;
    const cls = String(r.status)[0] + 'xx';
    if (cls in p.status) p.status[cls]++;
    const err = r.status >= 500 ? 1 : 0;
    const bump = (arr, key, id, extra) => { let e = arr.find(x => x[key] === id); if (!e) { e = Object.assign({ [key]: id, requests: 0, errors: 0 }, extra); arr.push(e); } e.requests++; e.errors += err; };
    if (r.route_id !== null) bump(p.routes, 'route_id', r.route_id, { route_name: N.routes.get(r.route_id) || '' });
    if (r.consumer_id !== null) bump(p.consumers, 'consumer_id', r.consumer_id, { username: N.consumers.get(r.consumer_id) || '' });
    // Percentiles of a step the page saw whole (it began after the history
    // was read); an older step keeps the server's until the next reload.
    if (p.live) {
      const s = H.seen.get(t) || []; s.push(r.latency_ms); H.seen.set(t, s);
      s.sort((a, b) => a - b);
      const at = q => s[Math.max(0, Math.min(s.length - 1, Math.ceil(q * s.length) - 1))];
      p.latency_ms = { p50: at(0.5), p95: at(0.95), p99: at(0.99) };
    }
    if (!H.pending) { H.pending = true; setTimeout(() => { H.pending = false; drawCharts(); }, 500); }
  }

  // A nice upper bound for an axis.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const e = Math.pow(10, Math.floor(Math.log10(v))), m = v / e;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
  }
  const fmtClock = t => new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  // A time chart over the last hour: series are [{name, color, values}]
  // (one value per point), stacked as areas or drawn as lines.
  function timeChart(id, title, unit, series, stacked) {
    const d = H.data, W = 600, Hh = 170, L = 44, R = 8, T = 10, B = 22;
    const pts = d.points, n = pts.length;
    const end = n ? new Date(pts[n - 1].time).getTime() + stepMs() : Date.now(), start = end - d.max_points * stepMs();
    const x = t => L + (t - start) / (end - start) * (W - L - R);
    let top = 0;
    const tops = new Array(n).fill(0);
    for (const s of series) for (let i = 0; i < n; i++) { if (stacked) { tops[i] += s.values[i]; top = Math.max(top, tops[i]); } else top = Math.max(top, s.values[i]); }
    const ymax = niceMax(top), y = v => T + (Hh - T - B) * (1 - v / ymax);
    const g = [];
    for (const f of [0, 0.5, 1]) {
      g.push(sv('line', { x1: L, x2: W - R, y1: y(ymax * f), y2: y(ymax * f), class: 'grid' }));
      g.push(sv('text', { x: L - 4, y: y(ymax * f) + 4, class: 'axis', 'text-anchor': 'end' }, fmtNum(ymax * f)));
    }
    for (let k = 0; k <= 4; k++) { const t = start + k * (end - start) / 4; g.push(sv('text', { x: x(t), y: Hh - 6, class: 'axis', 'text-anchor': k === 0 ? 'start' : k === 4 ? 'end' : 'middle' }, fmtClock(t))); }
    const px = i => x(new Date(pts[i].time).getTime() + stepMs() / 2);
    const cw = Math.max(1, (W - L - R) / d.max_points);
    if (stacked) {
      // One column per step, its classes stacked bottom up.
      for (let i = 0; i < n; i++) {
        let acc = 0;
        for (const s of series) {
          const v = s.values[i];
          if (!(v > 0)) continue;
          g.push(sv('rect', { x: px(i) - cw / 2, y: y(acc + v), width: Math.max(1, cw * 0.9), height: Math.max(0.5, y(acc) - y(acc + v)), fill: s.color, class: 'series', 'data-series': s.name }));
          acc += v;
        }
      }
    } else {
      // Lines through the steps that had requests; a lone step is a dot.
      for (const s of series) {
        let seg = [];
        const flush = () => {
          if (seg.length === 1) g.push(sv('circle', { cx: px(seg[0]), cy: y(s.values[seg[0]]), r: 2.2, fill: s.color, class: 'series', 'data-series': s.name }));
          else if (seg.length > 1) g.push(sv('path', { d: seg.map((i, k) => (k ? 'L' : 'M') + px(i) + ',' + y(s.values[i])).join(''), fill: 'none', stroke: s.color, 'stroke-width': 1.6, class: 'series', 'data-series': s.name }));
          seg = [];
        };
        for (let i = 0; i < n; i++) { if (pts[i].requests > 0) seg.push(i); else flush(); }
        flush();
      }
    }
    // Hover: one transparent column per point with its values.
    for (let i = 0; i < n; i++) {
      const tip = fmtTime(pts[i].time) + '\n' + series.map(s => s.name + ': ' + fmtNum(s.values[i]) + ' ' + unit).join('\n');
      g.push(sv('rect', { x: px(i) - cw / 2, y: T, width: cw, height: Hh - T - B, class: 'hover' }, sv('title', {}, tip)));
    }
    return h('div', { className: 'chart panel', id },
      h('div', { className: 'row' }, txt('strong', title), h('span', { className: 'spacer' }),
        series.map(s => h('span', { className: 'legend' }, sv('svg', { width: 10, height: 10 }, sv('rect', { width: 10, height: 10, rx: 2, fill: s.color })), ' ' + s.name))),
      sv('svg', { viewBox: '0 0 ' + W + ' ' + Hh, class: 'chart-svg', role: 'img', 'aria-label': title }, g));
  }
  // Top routes or consumers over the hour by requests or by errors.
  function topList(id, title, items, key, kind) {
    const top = items.filter(e => e[key] > 0).sort((a, b) => b[key] - a[key]).slice(0, 6);
    const max = top.length ? top[0][key] : 1;
    return h('div', { className: 'chart panel toplist', id },
      txt('strong', title),
      top.length ? h('table', { className: 'bars' }, top.map(e => h('tr', { 'data-id': e.id },
        h('td', { className: 'name' }, ref(kind, e.id, e.name)),
        h('td', { className: 'bar' }, sv('svg', { viewBox: '0 0 100 8', preserveAspectRatio: 'none', class: 'bar-svg' },
          sv('rect', { width: Math.max(1, 100 * e[key] / max), height: 8, rx: 1, fill: key === 'errors' ? CLASS_COLOR['5xx'] : CLASS_COLOR['3xx'] }))),
        txt('td', fmtNum(e[key]), 'num')))) : txt('p', key === 'errors' ? 'No errors in the last hour.' : 'No traffic in the last hour.', 'muted hint'));
  }
  function drawCharts() {
    const box = document.getElementById('charts');
    if (!box || !H.data) return;
    const pts = H.data.points, step = H.data.step_s;
    const sum = (arr, key, nameKey) => {
      const m = new Map();
      for (const p of pts) for (const e of p[arr]) { const c = m.get(e[key]) || { id: e[key], name: '', requests: 0, errors: 0 }; c.requests += e.requests; c.errors += e.errors; c.name = e[nameKey] || c.name; m.set(e[key], c); }
      for (const c of m.values()) c.name = (arr === 'routes' ? N.routes : N.consumers).get(c.id) || c.name;
      return [...m.values()];
    };
    const routes = sum('routes', 'route_id', 'route_name'), cons = sum('consumers', 'consumer_id', 'username');
    const total = pts.reduce((a, p) => a + p.requests, 0);
    box.replaceChildren(
      h('div', { className: 'row' }, txt('h3', 'Last hour'), txt('span', fmtNum(total) + ' requests · one point per ' + step + ' s', 'muted hint')),
      h('div', { className: 'charts' },
        timeChart('chart-requests', 'Requests per second by status', 'req/s', CLASSES.map(c => ({ name: c, color: CLASS_COLOR[c], values: pts.map(p => p.status[c] / step) })), true),
        timeChart('chart-latency', 'Latency percentiles', 'ms', ['p50', 'p95', 'p99'].map(q => ({ name: q, color: PCT_COLOR[q], values: pts.map(p => p.latency_ms[q]) })), false)),
      h('div', { className: 'charts four' },
        topList('top-routes', 'Top routes by requests', routes, 'requests', 'routes'),
        topList('top-route-errors', 'Top routes by errors (5xx)', routes, 'errors', 'routes'),
        topList('top-consumers', 'Top consumers by requests', cons, 'requests', 'consumers'),
        topList('top-consumer-errors', 'Top consumers by errors (5xx)', cons, 'errors', 'consumers')));
  }

  // ---- views ------------------------------------------------------------
  const views = { overview, apps: appsView, services, routes, plugins, consumers, streams, certificates, wasm: wasmView, log: logView, router: routerView, settings: settingsView, users: usersView, backup: backupView, account: accountView };
  window.addEventListener('hashchange', () => { if (S.me) route(); });
  function stopTimers() { if (S.timer) { clearInterval(S.timer); S.timer = null; } }
  function route() {
    stopTimers();
    // #view or #view/id (the id's row is selected).
    let [v, focus] = location.hash.replace(/^#/, '').split('/');
    S.focus = focus || null;
    if (!views[v]) v = 'overview';
    S.view = v;
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('on', a.getAttribute('href') === '#' + v);
    const root = h('section', { id: 'view-' + v });
    main.replaceChildren(root);
    views[v](root);
  }

  function card(k, v, small) { return h('div', { className: 'card' }, txt('div', k, 'k'), h('div', { className: 'v' }, v, small ? h('small', {}, ' ' + small) : null)); }

  function overview(root) {
    const err = txt('div', '', 'err');
    const body = h('div', {}, txt('p', 'Loading…', 'muted'));
    root.append(h('div', { className: 'row' }, txt('h2', 'Overview'), h('span', { className: 'spacer' }), txt('span', 'refreshes every 5 s', 'muted hint')), err, body);
    const charts = h('div', { id: 'charts' }, txt('p', 'Loading the last hour…', 'muted'));
    async function load() {
      try {
        const [m, c, hl, , cl] = await Promise.all([api('GET', '/api/v1/metrics'), api('GET', '/api/v1/config'), api('GET', '/api/v1/health'), loadNames(), api('GET', '/api/v1/cluster')]);
        if (!H.data || Date.now() - H.at > 60000) { H.at = Date.now(); loadHistory().catch(e => { charts.textContent = e.message; }); }
        err.textContent = '';
        const st = m.status || {}; const lat = m.latency_ms || {};
        const up = m.uptime_s >= 3600 ? (m.uptime_s / 3600).toFixed(1) + ' h' : m.uptime_s >= 60 ? (m.uptime_s / 60).toFixed(1) + ' min' : Math.round(m.uptime_s) + ' s';
        const healthy = hl.filter(t => t.state === 'healthy').length;
        body.replaceChildren(h('div', {},
          txt('h3', 'Traffic'),
          charts,
          h('div', { className: 'cards', id: 'traffic-cards' },
            card('Requests', fmtNum(m.total_requests)), card('Unmatched', fmtNum(m.unmatched_requests)),
            card('2xx', fmtNum(st['2xx'])), card('3xx', fmtNum(st['3xx'])), card('4xx', fmtNum(st['4xx'])), card('5xx', fmtNum(st['5xx'])),
            card('p50', fmtNum(lat.p50), 'ms'), card('p95', fmtNum(lat.p95), 'ms'), card('p99', fmtNum(lat.p99), 'ms'), card('Uptime', up)),
          txt('h3', 'Configuration · version ' + c.version),
          h('div', { className: 'cards', id: 'config-cards' },
            card('Services', c.services), card('Targets', c.targets), card('Routes', c.routes), card('Stream routes', c.stream_routes),
            card('Plugins', c.plugins), card('Consumers', c.consumers), card('Credentials', c.credentials), card('Certificates', c.certificates), card('WASM modules', c.wasm_modules)),
          txt('h3', 'Target health · ' + healthy + ' of ' + hl.length + ' healthy'),
          hl.length ? h('div', { className: 'tablewrap' }, h('table', { id: 'health' },
            h('tr', {}, ['Target', 'Service', 'Address', 'State', 'Check', 'Last checked', 'Last error'].map(x => txt('th', x))),
            hl.map(t => h('tr', { className: t.state === 'unhealthy' ? 'bad' : '' }, txt('td', t.host + ':' + t.port, 'mono'), h('td', {}, ref('services', t.service_id)), txt('td', t.address || '–', 'mono'),
              h('td', {}, txt('span', t.state, 'state ' + t.state)), txt('td', t.check || ''), txt('td', fmtTime(t.last_checked_at)), txt('td', t.last_error || '', 'muted'))))) : txt('p', 'No targets yet.', 'muted'),
          (m.routes && m.routes.length) ? [txt('h3', 'Requests per route'), h('div', { className: 'tablewrap' }, h('table', {},
            h('tr', {}, txt('th', 'Route'), txt('th', 'Requests'), txt('th', 'Errors')),
            m.routes.map(r => h('tr', {}, h('td', {}, ref('routes', r.route_id)), txt('td', fmtNum(r.requests), 'num'), txt('td', fmtNum(r.errors), 'num')))))] : null,
          nodesTable(cl)));
        drawCharts();
      } catch (e) { err.textContent = e.message; }
    }
    load();
    S.timer = setInterval(load, 5000);
  }

  // The gateway nodes sharing the store (one on SQLite); traffic figures
  // above are this node's own.
  function nodesTable(cl) {
    const state = n => n.stale ? 'stale' : n.config_version === cl.config_version ? 'current' : 'behind';
    const cls = { current: 'healthy', behind: 'unknown', stale: 'unhealthy' };
    return [txt('h3', 'Nodes · ' + cl.nodes.length + ' (' + cl.mode + ', configuration version ' + cl.config_version + ')'),
      h('div', { className: 'tablewrap' }, h('table', { id: 'nodes' },
        h('tr', {}, ['Node', 'Admin', 'HTTP', 'HTTPS', 'Version', 'State', 'Started', 'Last report'].map(x => txt('th', x))),
        cl.nodes.map(n => h('tr', {}, txt('td', n.id + (n.self ? ' (this node)' : ''), 'mono'), txt('td', n.admin_address, 'mono'),
          txt('td', n.http_address || '–', 'mono'), txt('td', n.https_address || '–', 'mono'), txt('td', String(n.config_version), 'num'),
          h('td', {}, txt('span', state(n), 'state ' + cls[state(n)])), txt('td', fmtTime(n.started_at)), txt('td', fmtTime(n.last_seen_at))))))];
  }

  // ---- services and targets ----------------------------------------------
  function services(root) {
    const err = txt('div', '', 'err');
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel mut' });
    const targetsBox = h('div', {});
    let selected = null;
    root.append(h('div', { className: 'row' }, txt('h2', 'Services'), h('span', { className: 'spacer' }), mutBtn('New service', 'primary', () => editForm(null))), formBox, err, tbl, targetsBox);
    formBox.hidden = true;

    async function load() {
      try {
        const list = await api('GET', '/api/v1/services');
        tbl.replaceChildren(h('table', { id: 'services-table' },
          h('tr', {}, ['ID', 'Name', 'Protocol', 'Balancing', 'Timeouts (ms)', 'Retries', 'Health check', ''].map(x => txt('th', x))),
          list.map(s => h('tr', { className: selected === s.id ? 'sel' : '', 'data-id': s.id },
            txt('td', s.id), h('td', {}, h('strong', {}, s.name)), txt('td', s.protocol), txt('td', s.lb_algorithm),
            txt('td', s.connect_timeout_ms + ' / ' + s.read_timeout_ms + ' / ' + s.write_timeout_ms, 'mono'), txt('td', s.retries),
            txt('td', s.health_path ? 'GET ' + s.health_path : 'tcp', 'mono'),
            h('td', { className: 'actions' },
              h('button', { type: 'button', className: 'small', onclick: () => { selected = s.id; load(); showTargets(s); } }, 'Targets'),
              mutBtn('Edit', 'small', () => editForm(s)),
              deleteBtn(err, 'service ' + s.name + ' with its targets, routes and plugins', '/api/v1/services/' + s.id, () => { if (selected === s.id) { selected = null; targetsBox.replaceChildren(); } load(); })))),
          list.length ? null : h('tr', {}, h('td', { colspan: 8, className: 'muted' }, 'No services yet.'))));
        focusRow(tbl);
        const f = S.focus && list.find(s => String(s.id) === S.focus);
        if (f && selected === null) { selected = f.id; showTargets(f); }
      } catch (e) { err.textContent = e.message; }
    }

    function editForm(s) {
      const ferr = txt('div', '', 'err');
      const f = h('form', { className: 'grid', id: 'service-form' },
        field('Name', h('input', { name: 'name', required: true, value: s ? s.name : '' })),
        field('Protocol', select('protocol', ['http', 'https'], s ? s.protocol : 'http')),
        field('Load balancing', select('lb_algorithm', ['round_robin', 'random', 'consistent', 'weighted'], s ? s.lb_algorithm : 'round_robin')),
        field('Retries', h('input', { name: 'retries', type: 'number', min: 0, value: s ? s.retries : 1 })),
        field('Connect timeout (ms)', h('input', { name: 'connect_timeout_ms', type: 'number', min: 0, value: s ? s.connect_timeout_ms : 5000 })),
        field('Read timeout (ms)', h('input', { name: 'read_timeout_ms', type: 'number', min: 0, value: s ? s.read_timeout_ms : 60000 })),
        field('Write timeout (ms)', h('input', { name: 'write_timeout_ms', type: 'number', min: 0, value: s ? s.write_timeout_ms : 60000 })),
        field('Health check path', h('input', { name: 'health_path', placeholder: 'blank: TCP check', value: s && s.health_path ? s.health_path : '' })),
        field('TLS server name', h('input', { name: 'tls_sni', placeholder: 'https upstreams', value: s && s.tls_sni ? s.tls_sni : '' })),
        formActions(formBox, s ? 'Save service' : 'Create service'),
        h('div', { className: 'wide' }, ferr));
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const body = { name: str(f, 'name'), protocol: str(f, 'protocol'), lb_algorithm: str(f, 'lb_algorithm'), retries: num(f, 'retries'),
          connect_timeout_ms: num(f, 'connect_timeout_ms'), read_timeout_ms: num(f, 'read_timeout_ms'), write_timeout_ms: num(f, 'write_timeout_ms'),
          health_path: str(f, 'health_path') || null, tls_sni: str(f, 'tls_sni') || null };
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          await save('/api/v1/services', s, body);
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'service', s, 'name');
    }

    async function showTargets(s) {
      const terr = txt('div', '', 'err');
      const tt = h('div', { className: 'tablewrap' });
      const f = h('form', { className: 'grid mut', id: 'target-form' },
        field('Host', h('input', { name: 'host', required: true, placeholder: '127.0.0.1' })),
        field('Port', h('input', { name: 'port', type: 'number', min: 0, max: 65535, required: true })),
        field('Weight', h('input', { name: 'weight', type: 'number', min: 0, value: 100 })),
        check('Enabled', 'enabled', true),
        h('div', { className: 'row' }, h('button', { type: 'submit', className: 'primary' }, 'Add target'), h('button', { type: 'button', className: 'cancel', hidden: true, onclick: () => editTarget(null) }, 'Cancel')));
      // Editing a target reuses the form (host, port, weight, enabled).
      let editing = null;
      function editTarget(t) {
        editing = t; f.reset();
        if (t) { f.elements.host.value = t.host; f.elements.port.value = t.port; f.elements.weight.value = t.weight; f.elements.enabled.checked = t.enabled; f.elements.host.focus(); }
        f.querySelector('button[type=submit]').textContent = t ? 'Save target #' + t.id : 'Add target';
        f.querySelector('button.cancel').hidden = !t;
      }
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        guard(terr, f.querySelector('button'), async () => {
          const body = { host: str(f, 'host'), port: num(f, 'port'), weight: num(f, 'weight'), enabled: bool(f, 'enabled') };
          await (editing ? api('PUT', '/api/v1/targets/' + editing.id, body) : api('POST', '/api/v1/services/' + s.id + '/targets', body));
          editTarget(null); loadTargets();
        });
      });
      async function loadTargets() {
        try {
          const [ts, hl] = await Promise.all([api('GET', '/api/v1/services/' + s.id + '/targets'), api('GET', '/api/v1/health').catch(() => [])]);
          const health = new Map(hl.filter(x => x.service_id === s.id).map(x => [x.target_id, x]));
          tt.replaceChildren(h('table', { id: 'targets-table' },
            h('tr', {}, ['ID', 'Host', 'Port', 'Weight', 'Enabled', 'Health', 'Last check', 'Last error', ''].map(x => txt('th', x))),
            ts.map(t => {
              const hs = health.get(t.id);
              const put = body => guard(terr, null, async () => { await api('PUT', '/api/v1/targets/' + t.id, Object.assign({ host: t.host, port: t.port, weight: t.weight, enabled: t.enabled }, body)); loadTargets(); });
              return h('tr', { 'data-id': t.id, className: hs && hs.state === 'unhealthy' ? 'bad' : '' }, txt('td', t.id), txt('td', t.host, 'mono'), txt('td', t.port), txt('td', t.weight),
                txt('td', t.enabled ? 'yes' : 'no', t.enabled ? 'ok' : 'off'),
                h('td', {}, hs ? txt('span', hs.state, 'state ' + hs.state) : txt('span', t.enabled ? 'not checked' : 'disabled', 'off')),
                txt('td', hs ? fmtTime(hs.last_checked_at) : '–', 'mono'), txt('td', hs && hs.last_error ? hs.last_error : '', 'muted'),
                h('td', { className: 'actions' },
                  mutBtn(t.enabled ? 'Disable' : 'Enable', 'small', () => put({ enabled: !t.enabled })),
                  mutBtn('Edit', 'small', () => editTarget(t)),
                  deleteBtn(terr, 'target ' + t.host + ':' + t.port, '/api/v1/targets/' + t.id, loadTargets)));
            }),
            ts.length ? null : h('tr', {}, h('td', { colspan: 9, className: 'muted' }, 'No targets: requests to this service answer 503.'))));
        } catch (e) { terr.textContent = e.message; }
      }
      targetsBox.replaceChildren(txt('h3', 'Targets of ' + s.name), h('div', { className: 'panel' }, f, terr), tt);
      loadTargets();
    }
    load();
  }

  // ---- routes -------------------------------------------------------------
  // ROUTES_PAGE is how many routes the routes screen shows at a time.
  const ROUTES_PAGE = 100;
  function routes(root) {
    const err = txt('div', '', 'err');
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel mut', hidden: true });
    let svcs = [];
    root.append(h('div', { className: 'row' }, txt('h2', 'Routes'), h('span', { className: 'spacer' }), mutBtn('New route', 'primary', () => editForm(null))), formBox, err, tbl);

    // A page of routes at a time: a gateway may hold tens of thousands.
    let offset = 0;
    const pager = h('div', { className: 'row', id: 'routes-pager' });
    root.append(pager);
    async function load() {
      try {
        const [pg, ss] = await Promise.all([page('/api/v1/routes', offset, ROUTES_PAGE), api('GET', '/api/v1/services')]);
        if (offset && offset >= pg.total) { offset = Math.max(0, pg.total - ROUTES_PAGE); return load(); } // past the end after deletes
        let rs = pg.items;
        // The route a link names (#routes/12) is shown even when on another page.
        if (/^[0-9]+$/.test(S.focus || '') && !rs.some(r => String(r.id) === S.focus)) {
          const one = await api('GET', '/api/v1/routes/' + encodeURIComponent(S.focus)).catch(() => null);
          if (one) rs = [one].concat(rs);
        }
        svcs = ss;
        pager.replaceChildren(
          txt('span', pg.total ? (offset + 1) + '–' + Math.min(offset + ROUTES_PAGE, pg.total) + ' of ' + pg.total : '', 'muted'),
          h('button', { type: 'button', className: 'small', id: 'routes-prev', disabled: offset === 0, onclick: () => { offset = Math.max(0, offset - ROUTES_PAGE); load(); } }, 'Previous'),
          h('button', { type: 'button', className: 'small', id: 'routes-next', disabled: offset + ROUTES_PAGE >= pg.total, onclick: () => { offset += ROUTES_PAGE; load(); } }, 'Next'));
        pager.hidden = pg.total <= ROUTES_PAGE;
        tbl.replaceChildren(h('table', { id: 'routes-table' },
          h('tr', {}, ['ID', 'Name', 'Service', 'Hosts', 'Paths', 'Methods', 'Priority', 'Options', 'Enabled', ''].map(x => txt('th', x))),
          rs.map(r => h('tr', { 'data-id': r.id },
            txt('td', r.id), h('td', {}, h('strong', {}, r.name)),
            txt('td', r.splits && r.splits.length ? 'split: ' + r.splits.map(x => serviceName(svcs, x.service_id) + ' ' + x.weight).join(', ') : serviceName(svcs, r.service_id)),
            h('td', {}, chips(r.hosts)), h('td', {}, chips(r.paths)), h('td', {}, chips(r.methods)), txt('td', r.priority),
            txt('td', [r.strip_path ? 'strip path' : '', r.preserve_host ? 'preserve host' : '', Object.keys(r.headers || {}).length ? 'headers' : ''].filter(Boolean).join(', ') || '–', 'muted'),
            txt('td', r.enabled ? 'yes' : 'no', r.enabled ? 'ok' : 'off'),
            h('td', { className: 'actions' },
              h('a', { href: '#router', onclick: () => { S.routerPrefill = { path: (r.paths.find(p => !p.startsWith('~')) || '/'), host: r.hosts.find(x => !x.startsWith('*')) || '', method: r.methods[0] || 'GET' }; } }, h('button', { type: 'button', className: 'small' }, 'Test')),
              mutBtn('Edit', 'small', () => editForm(r)),
              deleteBtn(err, 'route ' + r.name, '/api/v1/routes/' + r.id, load)))),
          rs.length ? null : h('tr', {}, h('td', { colspan: 10, className: 'muted' }, 'No routes yet: proxied requests answer 404.'))));
        focusRow(tbl);
      } catch (e) { err.textContent = e.message; }
    }

    function editForm(r) {
      const ferr = txt('div', '', 'err');
      if (!svcs.length) { err.textContent = 'Create a service first: a route sends its traffic to a service.'; return; }
      const f = h('form', { className: 'grid', id: 'route-form' },
        field('Name', h('input', { name: 'name', required: true, value: r ? r.name : '' })),
        field('Service', select('service_id', serviceOptions(svcs), r ? r.service_id : svcs[0].id)),
        field('Priority', h('input', { name: 'priority', type: 'number', value: r ? r.priority : 0 })),
        field(h('span', {}, 'Hosts ', h('span', { className: 'hint' }, 'comma-separated, *.example.com')), h('input', { name: 'hosts', value: r ? r.hosts.join(', ') : '' })),
        field(h('span', {}, 'Paths ', h('span', { className: 'hint' }, 'prefixes, or ~regex')), h('input', { name: 'paths', value: r ? r.paths.join(', ') : '', placeholder: '/api' })),
        field(h('span', {}, 'Methods ', h('span', { className: 'hint' }, 'blank: any')), h('input', { name: 'methods', value: r ? r.methods.join(', ') : '', placeholder: 'GET, POST' })),
        field(h('span', {}, 'Headers ', h('span', { className: 'hint' }, 'Name:value, … (* = present)')), h('input', { name: 'headers', value: r ? Object.entries(r.headers || {}).map(([k, v]) => k + ':' + v).join(', ') : '' }), 'wide'),
        field(h('span', {}, 'Traffic splits ', h('span', { className: 'hint' }, 'service=weight, … (empty: all to the service)')), h('input', { name: 'splits', value: r ? splitsText(r.splits, svcs) : '', placeholder: 'blue=90, green=10' }), 'wide'),
        check('Strip matched path', 'strip_path', r && r.strip_path), check('Preserve Host header', 'preserve_host', r && r.preserve_host), check('Enabled', 'enabled', r ? r.enabled : true),
        formActions(formBox, r ? 'Save route' : 'Create route'),
        h('div', { className: 'wide' }, ferr));
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const headers = {};
        for (const p of list(str(f, 'headers'))) { const i = p.indexOf(':'); if (i > 0) headers[p.slice(0, i).trim()] = p.slice(i + 1).trim(); }
        const body = { name: str(f, 'name'), service_id: Number(str(f, 'service_id')), priority: num(f, 'priority') || 0,
          hosts: list(str(f, 'hosts')), paths: list(str(f, 'paths')), methods: list(str(f, 'methods')).map(m => m.toUpperCase()), headers,
          splits: [], strip_path: bool(f, 'strip_path'), preserve_host: bool(f, 'preserve_host'), enabled: bool(f, 'enabled') };
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          body.splits = parseSplits(str(f, 'splits'), svcs);
          await save('/api/v1/routes', r, body);
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'route', r, 'name');
    }
    load();
  }

  // ---- plugins --------------------------------------------------------------
  // The plugin types this server accepts: the OpenAPI document has one
  // PluginConfig_<type> schema per registered type (title: the type name).
  let configSchemas = null;
  async function loadSchemas() {
    if (!configSchemas) configSchemas = ((await (await fetch('/openapi.json')).json()).components || {}).schemas || {};
    return configSchemas;
  }
  async function pluginTypes() {
    const schemas = await loadSchemas();
    return Object.entries(schemas).filter(([k]) => k.startsWith('PluginConfig_'))
      .map(([k, v]) => v.title || k.slice('PluginConfig_'.length).replace(/_/g, '-')).sort();
  }
  // ---- forms: every error next to its field ---------------------------------------
  // Forms do not use the browser's one-message-at-a-time validation: on
  // submit every invalid field gets its own message, and an API error that
  // names a field ("config.limit: …") is shown next to that field too.
  function clearFieldErrors(form) {
    for (const e of form.querySelectorAll('.field-err')) e.remove();
    for (const e of form.querySelectorAll('.invalid')) e.classList.remove('invalid');
  }
  function fieldError(form, name, message) {
    const el = form.elements[name];
    const input = el instanceof RadioNodeList ? el[0] : el;
    if (!input) return false;
    const box = input.closest('label') || input.parentElement;
    box.classList.add('invalid');
    box.append(txt('span', message, 'field-err'));
    return true;
  }
  // Shows an API error at its field: the longest field path of the form
  // that starts the message.
  function apiFieldError(form, message) {
    const m = /^([A-Za-z0-9_.[\]-]+): (.*)$/s.exec(message || '');
    if (!m) return;
    let path = m[1];
    while (path) {
      const el = form.elements[path];
      // At a containing field (the raw JSON), the message keeps the rest of the path.
      if (el && !(el.closest && el.closest('[hidden]'))) { fieldError(form, path, path === m[1] ? m[2] : m[1].slice(path.length).replace(/^\./, '') + ': ' + m[2]); return; }
      const cut = Math.max(path.lastIndexOf('.'), path.lastIndexOf('['));
      path = cut > 0 ? path.slice(0, cut) : '';
    }
  }
  document.addEventListener('submit', ev => {
    const form = ev.target;
    clearFieldErrors(form);
    const bad = [...form.elements].filter(e => e.willValidate && !e.closest('[hidden]') && !e.checkValidity());
    for (const e of form.elements) if (e.dataset && e.dataset.check) { const msg = e.closest('[hidden]') ? '' : checkers[e.dataset.check](e); if (msg) { bad.push(e); e.setCustomValidity(msg); } }
    if (!bad.length) return;
    ev.preventDefault(); ev.stopImmediatePropagation();
    for (const e of bad) { fieldError(form, e.name, e.validationMessage); e.setCustomValidity(''); }
    bad[0].focus();
  }, true);
  // Checks beyond the browser's constraints (data-check on an input).
  const checkers = {
    // Declared patterns are RE2; the browser's pattern attribute would
    // read them as JavaScript's v-mode expressions.
    pattern: e => { if (!e.value) return ''; try { return new RegExp(e.dataset.pattern).test(e.value) ? '' : 'contains characters that are not allowed'; } catch (x) { return ''; } },
    json: e => { if (!e.value.trim()) return ''; try { JSON.parse(e.value); return ''; } catch (x) { return 'not valid JSON: ' + x.message; } },
    list: e => {
      const spec = JSON.parse(e.dataset.items || '{}');
      for (const v of list(e.value)) {
        if (spec.enum && !spec.enum.map(String).includes(v)) return v + ': must be one of ' + spec.enum.join(', ');
        if ((spec.type === 'integer' || spec.type === 'number') && !(Number.isFinite(Number(v)))) return v + ': not a number';
        if (spec.type === 'integer' && (spec.minimum !== undefined && Number(v) < spec.minimum || spec.maximum !== undefined && Number(v) > spec.maximum)) return v + ': must be from ' + spec.minimum + ' to ' + spec.maximum;
        if (spec.maxLength && v.length > spec.maxLength) return v + ': longer than ' + spec.maxLength;
        if (spec.pattern && !new RegExp(spec.pattern).test(v)) return v + ': contains characters that are not allowed';
      }
      return '';
    },
  };

  // ---- plugin config forms from the declarations ------------------------------------
  // One field per property of the type's config schema (the OpenAPI
  // document's PluginConfig_<type>, the declaration that validates the
  // API): enums are choices, scalars are inputs with their bounds, lists of
  // scalars are comma-separated, anything nested is JSON. A field left empty
  // is not sent: the server applies the declared default, which the field
  // shows as its placeholder. Nothing is pre-filled.
  function configSchema(type) { return (configSchemas || {})['PluginConfig_' + String(type).replace(/-/g, '_')]; }
  const typeOf = p => Array.isArray(p.type) ? p.type.find(t => t !== 'null') : p.type;
  const scalar = t => t === 'string' || t === 'integer' || t === 'number';
  const showDefault = v => v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length) || (typeof v === 'object' && !Array.isArray(v) && !Object.keys(v).length) ? '' : (typeof v === 'object' ? JSON.stringify(v) : Array.isArray(v) ? v.join(', ') : String(v));
  function configFields(schema, cfg) {
    const req = new Set(schema.required || []);
    return Object.entries(schema.properties || {}).map(([k, p]) => {
      const name = 'config.' + k, t = typeOf(p), has = cfg && k in cfg && cfg[k] !== null, v = has ? cfg[k] : undefined;
      const def = showDefault(p.default);
      let input, kind;
      if (p.enum && scalar(t)) {
        kind = 'enum';
        input = select(name, [['', def ? 'default (' + def + ')' : (req.has(k) ? 'choose…' : 'not set')]].concat(p.enum.map(String)), has ? v : '');
        if (req.has(k) && !def) input.required = true;
      } else if (t === 'boolean') {
        kind = 'bool';
        input = select(name, [['', 'default (' + (p.default ? 'yes' : 'no') + ')'], ['true', 'yes'], ['false', 'no']], has ? String(v) : '');
      } else if (scalar(t)) {
        kind = t;
        input = h('input', { name, type: t === 'string' ? (p.format === 'password' || p.writeOnly ? 'password' : 'text') : 'number', value: has ? String(v) : '', placeholder: def ? 'default: ' + def : '',
          required: req.has(k) && !def, min: p.minimum, max: p.maximum, step: t === 'integer' ? 1 : 'any', maxlength: p.maxLength, 'data-check': p.pattern && t === 'string' ? 'pattern' : undefined, 'data-pattern': p.pattern, autocomplete: 'off' });
      } else if (t === 'array' && p.items && scalar(typeOf(p.items)) ) {
        kind = 'list';
        input = h('input', { name, value: has ? v.join(', ') : '', placeholder: def ? 'default: ' + def : (p.items.enum ? p.items.enum.join(', ') : 'comma-separated'), 'data-check': 'list', 'data-items': JSON.stringify(Object.assign({ type: typeOf(p.items) }, p.items)), required: req.has(k) && !def });
      } else {
        kind = 'json';
        input = h('textarea', { name, rows: 3, spellcheck: 'false', placeholder: def ? 'default: ' + def : 'JSON', 'data-check': 'json', required: req.has(k) && !def });
        input.value = has ? JSON.stringify(v, null, 2) : '';
      }
      input.dataset.kind = kind; input.dataset.key = k;
      const desc = p.description || '';
      return h('label', { className: kind === 'json' ? 'wide' : '' },
        h('span', {}, k, req.has(k) ? ' *' : '', p.enum || (p.items && p.items.enum) ? h('span', { className: 'hint' }, ' ' + (p.enum || p.items.enum).join(' | ')) : null),
        input, desc ? txt('span', desc, 'desc') : null);
    });
  }
  // The config object of the generated fields (empty fields left out).
  function readConfig(form) {
    const out = {};
    for (const e of form.querySelectorAll('[data-kind]')) {
      const k = e.dataset.key, v = e.value.trim();
      if (v === '') continue;
      switch (e.dataset.kind) {
        case 'integer': case 'number': out[k] = Number(v); break;
        case 'bool': out[k] = v === 'true'; break;
        case 'list': { const items = list(v); const it = JSON.parse(e.dataset.items); out[k] = it.type === 'integer' || it.type === 'number' ? items.map(Number) : items; break; }
        case 'json': out[k] = JSON.parse(v); break;
        default: out[k] = v;
      }
    }
    return out;
  }

  function plugins(root) {
    const err = txt('div', '', 'err');
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel mut', hidden: true });
    let svcs = [], rts = [];
    const purged = h('span', { className: 'ok', id: 'purge-result' });
    root.append(h('div', { className: 'row' }, txt('h2', 'Plugins'), h('span', { className: 'spacer' }), purged,
      mutBtn('Purge cache', '', async ev => { purged.textContent = ''; const r = await guard(err, ev.target, () => api('POST', '/api/v1/cache/purge')); if (r) purged.textContent = 'Purged ' + r.purged + ' cached response' + (r.purged === 1 ? '' : 's') + '.'; }),
      mutBtn('New plugin', 'primary', () => editForm(null))), formBox, err, tbl);
    const input = p => ({ type: p.type, scope: p.scope, service_id: p.service_id, route_id: p.route_id, ordering: p.ordering, enabled: p.enabled, config: p.config });
    // The scope, its route named from the first page of routes or looked up
    // (a gateway may hold more routes than a page: rtsMore).
    let rtsMore = false;
    const scopeCell = p => p.scope === 'global' ? 'global' : p.scope === 'service' ? 'service ' + ((svcs.find(s => s.id === p.service_id) || {}).name || '#' + p.service_id)
      : ['route ', ref('routes', p.route_id, (rts.find(r => r.id === p.route_id) || {}).name)];

    let types = [];
    async function load() {
      try {
        const [ps, ss, rs, ts] = await Promise.all([api('GET', '/api/v1/plugins'), api('GET', '/api/v1/services'), page('/api/v1/routes', 0, NAMES_PAGE), pluginTypes().catch(() => [])]);
        svcs = ss; rts = rs.items; types = ts;
        rtsMore = rs.total > NAMES_PAGE;
        if (rtsMore) N.partial.routes = true;
        tbl.replaceChildren(h('table', { id: 'plugins-table' },
          h('tr', {}, ['ID', 'Type', 'Applies to', 'Ordering', 'Config', 'Enabled', ''].map(x => txt('th', x))),
          ps.map(p => h('tr', { 'data-id': p.id }, txt('td', p.id), h('td', {}, h('strong', {}, p.type)), h('td', {}, scopeCell(p)), txt('td', p.ordering),
            h('td', {}, txt('code', JSON.stringify(p.config).slice(0, 90))),
            txt('td', p.enabled ? 'yes' : 'no', p.enabled ? 'ok' : 'off'),
            h('td', { className: 'actions' },
              mutBtn(p.enabled ? 'Disable' : 'Enable', 'small', async () => { await guard(err, null, () => api('PUT', '/api/v1/plugins/' + p.id, Object.assign(input(p), { enabled: !p.enabled }))); load(); }),
              mutBtn('Edit', 'small', () => editForm(p)),
              deleteBtn(err, 'plugin ' + p.type + ' #' + p.id, '/api/v1/plugins/' + p.id, load)))),
          ps.length ? null : h('tr', {}, h('td', { colspan: 7, className: 'muted' }, 'No plugins yet.'))));
      } catch (e) { err.textContent = e.message; }
    }

    function editForm(p) {
      const ferr = txt('div', '', 'err');
      const offered = types.length ? types.slice() : (p ? [p.type] : []);
      if (p && !offered.includes(p.type)) offered.push(p.type);
      // No type, and the narrowest scope, until the operator chooses.
      const typeSel = select('type', [['', 'choose a type…']].concat(offered), p ? p.type : '');
      typeSel.required = true;
      const scopeSel = select('scope', ['global', 'service', 'route'], p ? p.scope : (rts.length ? 'route' : svcs.length ? 'service' : 'global'));
      const svcSel = select('service_id', serviceOptions(svcs), p && p.service_id);
      // More routes than a page: the route by its id, not a list of them all.
      const rtSel = rtsMore ? h('input', { name: 'route_id', type: 'number', min: 1, value: p && p.route_id ? p.route_id : '' })
        : select('route_id', rts.map(r => [r.id, r.name + ' (#' + r.id + ')']), p && p.route_id);
      const svcField = field('Service', svcSel), rtField = field(rtsMore ? 'Route id' : 'Route', rtSel);
      const sync = () => { svcField.hidden = scopeSel.value !== 'service'; rtField.hidden = scopeSel.value !== 'route'; };
      scopeSel.addEventListener('change', sync); sync();
      // The config: fields from the type's declaration, or raw JSON.
      const about = h('p', { className: 'hint wide', id: 'plugin-about' });
      const cfgBox = h('div', { className: 'subgrid wide', id: 'plugin-config' });
      const raw = h('textarea', { name: 'config', rows: 8, spellcheck: 'false', 'data-check': 'json' });
      const rawField = field(h('span', {}, 'Config (JSON) ', h('span', { className: 'hint' }, 'every field is in ', h('a', { href: '/docs', target: '_blank' }, '/docs'))), raw, 'wide');
      const rawToggle = h('input', { type: 'checkbox', name: 'raw_config' });
      let current = p ? (p.config || {}) : {};
      function renderFields() {
        const sch = configSchema(typeSel.value);
        about.textContent = sch ? sch.description || '' : '';
        cfgBox.replaceChildren(...(sch ? configFields(sch, current) : []));
        if (typeSel.value && !sch) rawToggle.checked = true; // a type without a declaration here: JSON only
        const asRaw = rawToggle.checked;
        rawField.hidden = !asRaw; cfgBox.hidden = asRaw;
        if (asRaw) raw.value = JSON.stringify(current, null, 2);
      }
      rawToggle.addEventListener('change', () => {
        clearFieldErrors(f);
        if (rawToggle.checked) { try { current = readConfig(f); } catch (e) { rawToggle.checked = false; ferr.textContent = e.message; return; } }
        else { try { current = raw.value.trim() ? JSON.parse(raw.value) : {}; } catch (e) { rawToggle.checked = true; fieldError(f, 'config', 'not valid JSON: ' + e.message); return; } }
        renderFields();
      });
      typeSel.addEventListener('change', () => { current = p && p.type === typeSel.value ? p.config : {}; clearFieldErrors(f); renderFields(); });
      const f = h('form', { className: 'grid', id: 'plugin-form' },
        field('Type', typeSel), field('Scope', scopeSel), svcField, rtField,
        field(h('span', {}, 'Ordering ', h('span', { className: 'hint' }, 'blank: type default')), h('input', { name: 'ordering', type: 'number', value: p ? p.ordering : '' })),
        check('Enabled', 'enabled', p ? p.enabled : true),
        about, cfgBox, rawField,
        h('label', { className: 'check wide' }, rawToggle, 'Edit the config as JSON'),
        formActions(formBox, p ? 'Save plugin' : 'Create plugin'),
        h('div', { className: 'wide' }, ferr));
      renderFields();
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        let config;
        try { config = rawToggle.checked ? (raw.value.trim() ? JSON.parse(raw.value) : null) : readConfig(f); } catch (e) { ferr.textContent = 'Config: ' + e.message; return; }
        const scope = scopeSel.value;
        const body = { type: typeSel.value, scope, service_id: scope === 'service' ? Number(svcSel.value) || null : null, route_id: scope === 'route' ? Number(rtSel.value) || null : null,
          enabled: bool(f, 'enabled'), config };
        const o = num(f, 'ordering'); if (o !== undefined) body.ordering = o;
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          await save('/api/v1/plugins', p, body);
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'plugin', p);
    }
    load();
  }

  // ---- consumers and credentials ---------------------------------------------
  function consumers(root) {
    const err = txt('div', '', 'err');
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel mut', hidden: true });
    const credBox = h('div', {});
    let selected = null;
    root.append(h('div', { className: 'row' }, txt('h2', 'Consumers'), h('span', { className: 'spacer' }), mutBtn('New consumer', 'primary', () => editForm(null))), formBox, err, tbl, credBox);

    async function load() {
      try {
        const cs = await api('GET', '/api/v1/consumers');
        tbl.replaceChildren(h('table', { id: 'consumers-table' },
          h('tr', {}, ['ID', 'Username', 'Custom id', 'Groups', 'Created', ''].map(x => txt('th', x))),
          cs.map(c => h('tr', { className: selected === c.id ? 'sel' : '', 'data-id': c.id }, txt('td', c.id), h('td', {}, h('strong', {}, c.username)), txt('td', c.custom_id || '–', 'mono'),
            h('td', {}, c.groups.length ? c.groups.map(g => txt('span', g, 'chip')) : txt('span', 'none', 'off')), txt('td', new Date(c.created_at).toLocaleString()),
            h('td', { className: 'actions' },
              h('button', { type: 'button', className: 'small', onclick: () => { selected = c.id; load(); showCreds(c); } }, 'Credentials'),
              mutBtn('Edit', 'small', () => editForm(c)),
              deleteBtn(err, 'consumer ' + c.username + ' and its credentials', '/api/v1/consumers/' + c.id, () => { if (selected === c.id) { selected = null; credBox.replaceChildren(); } load(); })))),
          cs.length ? null : h('tr', {}, h('td', { colspan: 6, className: 'muted' }, 'No consumers yet.'))));
        focusRow(tbl);
      } catch (e) { err.textContent = e.message; }
    }

    function editForm(c) {
      const ferr = txt('div', '', 'err');
      const f = h('form', { className: 'grid', id: 'consumer-form' },
        field('Username', h('input', { name: 'username', required: true, value: c ? c.username : '' })),
        field('Custom id', h('input', { name: 'custom_id', value: c && c.custom_id ? c.custom_id : '' })),
        field(h('span', {}, 'Groups ', h('span', { className: 'hint' }, 'comma-separated, for acl')), h('input', { name: 'groups', value: c ? c.groups.join(', ') : '' })),
        formActions(formBox, c ? 'Save consumer' : 'Create consumer', 'row'),
        h('div', { className: 'wide' }, ferr));
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const body = { username: str(f, 'username'), custom_id: str(f, 'custom_id') || null, groups: list(str(f, 'groups')) };
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          await save('/api/v1/consumers', c, body);
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'consumer', c);
    }

    function showCreds(c) {
      const cerr = txt('div', '', 'err');
      const ct = h('div', { className: 'tablewrap' });
      const typeSel = select('type', ['key-auth', 'basic-auth', 'jwt'], 'key-auth');
      const algSel = select('algorithm', ['HS256', 'HS384', 'HS512', 'RS256', 'ES256'], 'HS256');
      const fields = {
        key: field('Key', h('input', { name: 'key', placeholder: 'blank: generated' })),
        username: field('Username', h('input', { name: 'username' })),
        password: field('Password', h('input', { name: 'password', type: 'password', autocomplete: 'new-password' })),
        algorithm: field('Algorithm', algSel),
        secret: field('Secret', h('input', { name: 'secret', type: 'password', autocomplete: 'off' })),
        public_key: field('Public key (PEM)', h('textarea', { name: 'public_key', rows: 4 }), 'wide'),
      };
      const sync = () => {
        const t = typeSel.value, asym = /^(RS|ES)/.test(algSel.value);
        const show = { key: t !== 'basic-auth', username: t === 'basic-auth', password: t === 'basic-auth', algorithm: t === 'jwt', secret: t === 'jwt' && !asym, public_key: t === 'jwt' && asym };
        for (const [k, el] of Object.entries(fields)) el.hidden = !show[k];
      };
      typeSel.addEventListener('change', sync); algSel.addEventListener('change', sync); sync();
      const f = h('form', { className: 'grid mut', id: 'credential-form' }, field('Type', typeSel), Object.values(fields), h('div', {}, h('button', { type: 'submit', className: 'primary' }, 'Add credential')));
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const body = { type: typeSel.value };
        for (const [k, el] of Object.entries(fields)) { if (el.hidden) continue; const v = f.elements[k].value.trim(); if (v) body[k] = v; }
        guard(cerr, f.querySelector('button'), async () => { await api('POST', '/api/v1/consumers/' + c.id + '/credentials', body); f.reset(); sync(); loadCreds(); });
      });
      async function loadCreds() {
        try {
          const cr = await api('GET', '/api/v1/consumers/' + c.id + '/credentials');
          ct.replaceChildren(h('table', { id: 'credentials-table' },
            h('tr', {}, ['ID', 'Type', 'Key / username', 'Algorithm', 'Created', ''].map(x => txt('th', x))),
            cr.map(x => h('tr', {}, txt('td', x.id), txt('td', x.type), txt('td', x.key || x.username || '–', 'mono'), txt('td', x.algorithm || '–'), txt('td', new Date(x.created_at).toLocaleString()),
              h('td', { className: 'actions' }, deleteBtn(cerr, x.type + ' credential #' + x.id, '/api/v1/credentials/' + x.id, loadCreds)))),
            cr.length ? null : h('tr', {}, h('td', { colspan: 6, className: 'muted' }, 'No credentials.'))));
        } catch (e) { cerr.textContent = e.message; }
      }
      credBox.replaceChildren(txt('h3', 'Credentials of ' + c.username), h('div', { className: 'panel' }, f, cerr, h('p', { className: 'hint' }, 'Secrets (passwords, jwt secrets) are never shown again after creation.')), ct);
      loadCreds();
    }
    load();
  }

  // ---- live request log ---------------------------------------------------------
  // Filters (status class, route, consumer, text) stay while the page lives.
  const LF = { q: '', cls: '', route: '', consumer: '', trace: '', waf: '', detail: null };
  function logView(root) {
    const filter = h('input', { type: 'search', id: 'log-filter', placeholder: 'filter: path, host, status, request id…', value: LF.q, oninput: ev => { LF.q = ev.target.value; renderLogRows(); } });
    const sel = (id, key, options) => { const e = select(id, options, LF[key]); e.id = id; e.addEventListener('change', () => { LF[key] = e.value; renderLogRows(); }); return e; };
    const clsSel = sel('log-class', 'cls', [['', 'any status'], '2xx', '3xx', '4xx', '5xx']);
    const routeSel = sel('log-route', 'route', [['', 'any route'], ['none', 'unmatched']]);
    const consSel = sel('log-consumer', 'consumer', [['', 'any consumer'], ['none', 'anonymous']]);
    // trace_id is set when an opentelemetry plugin traced the request.
    const traceFilter = h('input', { type: 'search', id: 'log-trace', placeholder: 'trace id', size: 20, value: LF.trace, oninput: ev => { LF.trace = ev.target.value.trim().toLowerCase(); renderLogRows(); } });
    const wafSel = sel('log-waf', 'waf', [['', 'any firewall verdict'], ['any', 'waf: any match'], ['blocked', 'waf: blocked'], ['detected', 'waf: detected']]);
    const pause = h('button', { type: 'button', id: 'log-pause', onclick: () => { S.paused = !S.paused; pause.textContent = S.paused ? 'Resume' : 'Pause'; renderLogRows(); } }, S.paused ? 'Resume' : 'Pause');
    root.append(
      h('div', { className: 'row' }, txt('h2', 'Live request log'), h('span', { id: 'live-state', className: 'state ' + (S.live || '') }, S.live || 'connecting'), h('span', { className: 'spacer' }), pause,
        h('button', { type: 'button', onclick: () => { S.log = []; LF.detail = null; renderLogRows(); } }, 'Clear')),
      h('div', { className: 'row filters' }, clsSel, routeSel, consSel, wafSel, traceFilter, filter),
      h('p', { className: 'muted hint' }, 'Completed proxied requests, newest first, from the event stream /api/v1/events (the last 500 are kept). Click a row for its details.'),
      h('div', { id: 'log-detail' }),
      h('div', { className: 'tablewrap' }, h('table', { id: 'log-table' },
        h('thead', {}, h('tr', {}, ['Time', 'Method', 'Host', 'Path', 'Status', 'Latency', 'Bytes', 'Route', 'Consumer', 'Target', 'Client', 'Request id', 'Trace id'].map(x => txt('th', x)))),
        h('tbody', { id: 'log-rows' }))));
    // The route and consumer choices are the named ones.
    loadNames(true).then(() => {
      routeSel.append(...[...N.routes].sort((a, b) => a[1].localeCompare(b[1])).map(([id, n]) => h('option', { value: String(id), textContent: n, selected: String(id) === LF.route })));
      consSel.append(...[...N.consumers].sort((a, b) => a[1].localeCompare(b[1])).map(([id, n]) => h('option', { value: String(id), textContent: n, selected: String(id) === LF.consumer })));
      renderLogRows();
    });
    renderLogRows();
  }
  function logMatches(r) {
    if (LF.cls && String(r.status)[0] !== LF.cls[0]) return false;
    if (LF.route && (LF.route === 'none' ? r.route_id !== null : String(r.route_id) !== LF.route)) return false;
    if (LF.consumer && (LF.consumer === 'none' ? r.consumer_id !== null : String(r.consumer_id) !== LF.consumer)) return false;
    if (LF.trace && !(r.trace_id || '').startsWith(LF.trace)) return false;
    if (LF.waf && (!r.waf || (LF.waf !== 'any' && r.waf.action !== LF.waf))) return false;
    const q = LF.q.toLowerCase();
    const rules = r.waf ? r.waf.rules.map(x => x.id).join(' ') : '';
    return !q || [r.method, r.host, r.path, r.status, r.target, r.client_ip, r.request_id, r.trace_id, N.routes.get(r.route_id), N.consumers.get(r.consumer_id), rules].join(' ').toLowerCase().includes(q);
  }
  function renderLogRows() {
    const tb = document.getElementById('log-rows');
    if (!tb) return;
    const rows = S.log.filter(logMatches).slice(0, 300);
    tb.replaceChildren(...rows.map(r => h('tr', { 'data-id': r.id, className: 'click' + (LF.detail && LF.detail.id === r.id ? ' sel' : ''), onclick: ev => { if (ev.target.closest('a')) return; LF.detail = r; renderLogRows(); } },
      txt('td', fmtTime(r.time), 'mono'), h('td', {}, txt('span', r.method, 'badge ' + String(r.method).toLowerCase())), txt('td', r.host, 'mono'), txt('td', r.path, 'mono'),
      txt('td', r.status, statusClass(r.status)), txt('td', fmtNum(r.latency_ms) + ' ms', 'num'), txt('td', fmtNum(r.bytes_sent), 'num'),
      h('td', {}, r.route_id !== null ? ref('routes', r.route_id) : txt('span', 'unmatched', 'off')),
      h('td', {}, r.consumer_id !== null ? ref('consumers', r.consumer_id) : txt('span', '–', 'off')),
      txt('td', r.target || '–', 'mono'), txt('td', r.client_ip, 'mono'), txt('td', r.request_id || '–', 'mono small'), txt('td', r.trace_id || '–', 'mono small'))));
    if (!rows.length) tb.append(h('tr', {}, h('td', { colspan: 13, className: 'muted' }, S.log.length ? 'No request matches the filters.' : 'No requests yet. Send traffic through the proxy listener to see it here.')));
    renderLogDetail();
  }
  function renderLogDetail() {
    const box = document.getElementById('log-detail');
    if (!box) return;
    const r = LF.detail;
    if (!r) { box.replaceChildren(); return; }
    const kv = (k, v) => [txt('dt', k), h('dd', {}, v)];
    box.replaceChildren(h('div', { className: 'panel', id: 'log-detail-panel' },
      h('div', { className: 'row' }, txt('strong', r.method + ' ' + r.scheme + '://' + r.host + r.path), txt('span', String(r.status), statusClass(r.status)), h('span', { className: 'spacer' }),
        h('button', { type: 'button', className: 'small', onclick: () => { LF.detail = null; renderLogRows(); } }, 'Close')),
      h('dl', { className: 'kv' },
        kv('Time', new Date(r.time).toLocaleString()), kv('Latency', fmtNum(r.latency_ms) + ' ms'), kv('Bytes sent', fmtNum(r.bytes_sent)),
        kv('Route', r.route_id !== null ? ref('routes', r.route_id) : 'unmatched'), kv('Service', ref('services', r.service_id)),
        kv('Consumer', r.consumer_id !== null ? ref('consumers', r.consumer_id) : 'anonymous'), kv('Target', r.target || '–'),
        kv('Client', r.client_ip || '–'), kv('User agent', r.user_agent || '–'), kv('Request id', r.request_id || '–'), kv('Trace id', r.trace_id || '–'), kv('Span id', r.span_id || '–'),
        ...(r.waf ? kv('Firewall', r.waf.action + ', anomaly score ' + r.waf.anomaly_score + (r.waf.rules.length ? ': ' + r.waf.rules.map(x => x.id + ' ' + x.message).join('; ') : '')) : [])),
      h('details', {}, h('summary', {}, 'Record (JSON)'), h('pre', { className: 'json' }, JSON.stringify(r, null, 2)))));
  }

  // ---- applications: expose an app in one screen ----------------------------------
  function appsView(root) {
    const err = txt('div', '', 'err');
    const probeOut = h('div', { id: 'probe-result' });
    const out = h('div', { id: 'app-result' });
    const f = h('form', { className: 'grid mut', id: 'app-form' },
      field('Name', h('input', { name: 'name', required: true, maxlength: 100, placeholder: 'shop' })),
      field(h('span', {}, 'Domain ', h('span', { className: 'hint' }, 'exact host name')), h('input', { name: 'domain', required: true, placeholder: 'shop.example.com' })),
      field(h('span', {}, 'Upstream ', h('span', { className: 'hint' }, 'http(s)://host:port')), h('input', { name: 'upstream_url', required: true, placeholder: 'http://10.0.0.5:8080' }), 'wide'),
      check('Redirect HTTP to HTTPS', 'https', false), check('HSTS (needs HTTPS)', 'hsts', false),
      field(h('span', {}, 'Allowed clients ', h('span', { className: 'hint' }, 'IPs or CIDRs, comma-separated; empty: anyone')), h('input', { name: 'allowed_cidrs' }), 'wide'),
      h('div', { className: 'row wide' }, h('button', { type: 'button', id: 'probe-button', onclick: ev => {
        probeOut.replaceChildren();
        guard(err, ev.target, async () => {
          const r = await api('POST', '/api/v1/applications/test-upstream', { upstream_url: str(f, 'upstream_url') });
          probeOut.replaceChildren(h('p', {}, txt('strong', r.reachable ? 'Reachable' : 'Not reachable', r.reachable ? 'ok' : 's5'),
            r.status ? ' · HTTP ' + r.status : '', ' · ' + r.latency_ms + ' ms · ' + r.message));
        });
      } }, 'Test upstream'), h('button', { type: 'submit', className: 'primary' }, 'Expose the app')),
      h('div', { className: 'wide' }, probeOut, err));
    f.addEventListener('submit', ev => {
      ev.preventDefault();
      const body = { name: str(f, 'name'), domain: str(f, 'domain'), upstream_url: str(f, 'upstream_url'), https: bool(f, 'https'), hsts: bool(f, 'hsts'), allowed_cidrs: list(str(f, 'allowed_cidrs')) };
      guard(err, f.querySelector('button[type=submit]'), async () => {
        const r = await api('POST', '/api/v1/applications', body);
        N.at = 0;
        out.replaceChildren(h('div', { className: 'panel' }, h('p', {}, txt('strong', 'Exposed ' + r.name + ' at ', 'ok'), h('code', {}, r.url)),
          h('p', {}, 'Created: service ', ref('services', r.service_id, r.name), ', route ', ref('routes', r.route_id, r.name),
            r.plugin_ids.length ? ', ' + r.plugin_ids.length + ' plugin(s) on the route' : '', '.')));
        f.reset();
      });
    });
    root.append(txt('h2', 'Expose an app'),
      h('p', { className: 'muted hint' }, 'One domain to one upstream: a service with its target, a route for the domain and its plugins, created together (nothing is created when any part is refused).'),
      h('div', { className: 'panel' }, canEdit() ? f : txt('p', 'Editors and admins expose apps.', 'muted')), out);
  }

  // ---- ACME account settings: Cloudflare token (dns-01) and EAB (certificates view) ----
  function acmePanel() {
    const box = h('div', { className: 'cols', id: 'acme-panel' });
    const err = txt('div', '', 'err');
    async function load() {
      let cf = { configured: false };
      try { cf = await api('GET', '/api/v1/acme/cloudflare-token'); } catch (e) { err.textContent = e.message; }
      const tf = h('form', { className: 'grid', id: 'cloudflare-form' },
        field('API token', h('input', { name: 'token', type: 'password', autocomplete: 'off', required: true, placeholder: cf.configured ? 'set · a new one replaces it' : 'Zone:Read, DNS:Edit' }), 'wide'),
        h('div', { className: 'row wide' }, admBtn('Save token', 'primary', null), cf.configured ? admBtn('Remove token', 'danger', async ev => {
          if (!window.confirm('Remove the Cloudflare token? dns-01 certificates stay pending until a token is set.')) return;
          await guard(err, ev.target, () => api('DELETE', '/api/v1/acme/cloudflare-token')); load();
        }) : null));
      tf.querySelector('button.primary').type = 'submit';
      tf.addEventListener('submit', ev => { ev.preventDefault(); guard(err, null, async () => { await api('PUT', '/api/v1/acme/cloudflare-token', { token: tf.elements.token.value }); load(); }); });
      const ef = h('form', { className: 'grid', id: 'eab-form' },
        field('Directory', h('input', { name: 'directory_url', required: true, list: 'acme-dirs-eab', placeholder: 'zerossl' }), 'wide'),
        h('datalist', { id: 'acme-dirs-eab' }, ['letsencrypt', 'letsencrypt-staging', 'zerossl', 'google', 'google-staging'].map(v => h('option', { value: v }))),
        field('Key id', h('input', { name: 'key_id', autocomplete: 'off', required: true })),
        field('HMAC key', h('input', { name: 'hmac_key', type: 'password', autocomplete: 'off', required: true })),
        h('div', { className: 'row wide' }, admBtn('Save EAB', 'primary', null),
          admBtn('Status', 'small', async ev => { const st = await guard(err, ev.target, () => api('GET', '/api/v1/acme/eab?directory_url=' + encodeURIComponent(str(ef, 'directory_url')))); if (st) eabOut.textContent = st.directory_url + ': ' + (st.configured ? 'credentials stored' : 'no credentials') + ', ' + (st.account_registered ? 'account registered' : 'no account yet'); })),
        h('div', { className: 'wide', id: 'eab-status' }));
      const eabOut = ef.querySelector('#eab-status');
      ef.querySelector('button.primary').type = 'submit';
      ef.addEventListener('submit', ev => {
        ev.preventDefault();
        guard(err, null, async () => { await api('PUT', '/api/v1/acme/eab', { directory_url: str(ef, 'directory_url'), key_id: str(ef, 'key_id'), hmac_key: ef.elements.hmac_key.value }); ef.elements.hmac_key.value = ''; eabOut.textContent = 'Saved for ' + str(ef, 'directory_url') + '.'; });
      });
      box.replaceChildren(
        h('div', { className: 'panel' }, txt('h3', 'Cloudflare (dns-01)'), h('p', {}, 'Token: ', cf.configured ? txt('strong', 'configured', 'ok') : txt('strong', 'not set', 'off'), txt('span', ' · never shown again', 'hint')), isAdmin() ? tf : null),
        h('div', { className: 'panel' }, txt('h3', 'External account binding'), h('p', { className: 'hint' }, 'For CAs that need it (ZeroSSL, Google): used once to register the ACME account.'), isAdmin() ? ef : txt('p', 'Admins manage EAB credentials.', 'muted')),
        err);
    }
    load();
    return box;
  }

  // ---- route splits: "service name=weight, …" ----------------------------------------
  const splitsText = (splits, svcs) => (splits || []).map(x => ((svcs.find(s => s.id === x.service_id) || {}).name || '#' + x.service_id) + '=' + x.weight).join(', ');
  function parseSplits(text, svcs) {
    return list(text).map(p => {
      const [n, w] = p.split('=').map(x => x.trim());
      const s = svcs.find(x => x.name === n || '#' + x.id === n);
      if (!s) throw new Error('splits: no service named ' + n);
      if (!/^\d+$/.test(w || '')) throw new Error('splits: ' + p + ': the weight must be a whole number');
      return { service_id: s.id, weight: Number(w) };
    });
  }

  // ---- router dry run ------------------------------------------------------------
  function routerView(root) {
    const pre = S.routerPrefill || {}; S.routerPrefill = null;
    const err = txt('div', '', 'err');
    const out = h('div', { id: 'router-result' });
    const f = h('form', { className: 'grid', id: 'router-form' },
      field('Method', select('method', ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'], pre.method || 'GET')),
      field('Host', h('input', { name: 'host', placeholder: 'api.example.com', value: pre.host || '' })),
      field('Path', h('input', { name: 'path', required: true, value: pre.path || '/' })),
      field(h('span', {}, 'Headers ', h('span', { className: 'hint' }, 'Name:value, …')), h('input', { name: 'headers' })),
      h('div', {}, h('button', { type: 'submit', className: 'primary' }, 'Test')));
    f.addEventListener('submit', ev => {
      ev.preventDefault();
      const q = new URLSearchParams({ path: str(f, 'path'), host: str(f, 'host'), method: str(f, 'method') });
      if (str(f, 'headers')) q.set('headers', str(f, 'headers'));
      guard(err, f.querySelector('button'), async () => {
        const r = await api('GET', '/api/v1/router/test?' + q);
        out.replaceChildren(h('div', { className: 'panel' },
          r.matched ? h('p', {}, h('strong', { className: 'ok' }, 'Matched route ' + r.route_name + ' (#' + r.route_id + ')'), ' → service #' + r.service_id + ', matched ', h('code', {}, r.matched_path || ''), ', upstream path ', h('code', {}, r.upstream_path || ''))
            : h('p', {}, h('strong', { className: 's5' }, 'No route matches'), r.reason ? ': ' + r.reason : ''),
          h('pre', { className: 'json' }, JSON.stringify(r, null, 2))));
      });
    });
    root.append(txt('h2', 'Router test'), h('p', { className: 'muted' }, 'Which route would serve a request? A dry run of the live routing table: no upstream is contacted.'), h('div', { className: 'panel' }, f, err), out);
    if (pre.path) f.requestSubmit();
  }

  // ---- stream routes (TCP) -------------------------------------------------------
  function streams(root) {
    const err = txt('div', '', 'err');
    const note = h('div', { className: 'note', id: 'stream-note', role: 'status' });
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel mut', hidden: true });
    let svcs = [];
    root.append(h('div', { className: 'row' }, txt('h2', 'Stream routes'), h('span', { className: 'spacer' }), mutBtn('New stream route', 'primary', () => editForm(null))),
      h('p', { className: 'muted hint' }, 'Raw TCP: a connection accepted on the listen address is proxied to the service\'s targets. Listeners bind when the gateway starts.'),
      note, formBox, err, tbl);
    const showNote = r => { if (r && r.note) note.textContent = 'Note: ' + r.note + '.'; };

    async function load() {
      try {
        const [rs, ss] = await Promise.all([api('GET', '/api/v1/stream-routes'), api('GET', '/api/v1/services')]);
        svcs = ss;
        tbl.replaceChildren(h('table', { id: 'stream-routes-table' },
          h('tr', {}, ['ID', 'Name', 'Listen address', 'Service', 'Enabled', 'Updated', ''].map(x => txt('th', x))),
          rs.map(r => h('tr', { 'data-id': r.id }, txt('td', r.id), h('td', {}, h('strong', {}, r.name)), txt('td', r.listen_addr, 'mono'), txt('td', serviceName(svcs, r.service_id)),
            txt('td', r.enabled ? 'yes' : 'no', r.enabled ? 'ok' : 'off'), txt('td', new Date(r.updated_at).toLocaleString()),
            h('td', { className: 'actions' },
              mutBtn('Edit', 'small', () => editForm(r)),
              deleteBtn(err, 'stream route ' + r.name, '/api/v1/stream-routes/' + r.id, res => { showNote(res); load(); })))),
          rs.length ? null : h('tr', {}, h('td', { colspan: 7, className: 'muted' }, 'No stream routes.'))));
      } catch (e) { err.textContent = e.message; }
    }

    function editForm(r) {
      const ferr = txt('div', '', 'err');
      if (!svcs.length) { err.textContent = 'Create a service first: a stream route sends its connections to a service.'; return; }
      const f = h('form', { className: 'grid', id: 'stream-form' },
        field('Name', h('input', { name: 'name', required: true, value: r ? r.name : '' })),
        field(h('span', {}, 'Listen address ', h('span', { className: 'hint' }, 'host:port')), h('input', { name: 'listen_addr', required: true, value: r ? r.listen_addr : '', placeholder: '0.0.0.0:5432' })),
        field('Service', select('service_id', serviceOptions(svcs), r ? r.service_id : svcs[0].id)),
        check('Enabled', 'enabled', r ? r.enabled : true),
        formActions(formBox, r ? 'Save stream route' : 'Create stream route'),
        h('div', { className: 'wide' }, ferr));
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const body = { name: str(f, 'name'), listen_addr: str(f, 'listen_addr'), service_id: Number(str(f, 'service_id')), enabled: bool(f, 'enabled') };
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          const res = await save('/api/v1/stream-routes', r, body);
          note.textContent = ''; showNote(res);
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'stream route', r, 'name');
    }
    load();
  }

  // ---- certificates --------------------------------------------------------------
  function certificates(root) {
    const err = txt('div', '', 'err');
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel mut', hidden: true });
    root.append(h('div', { className: 'row' }, txt('h2', 'Certificates'), h('span', { className: 'spacer' }), mutBtn('New certificate', 'primary', () => editForm())),
      h('p', { className: 'muted hint' }, 'TLS certificates served by SNI on the HTTPS listener. Private keys are never shown. ACME certificates use the directory and e-mail of ', h('a', { href: '#settings' }, 'Settings'), '.'),
      formBox, err, tbl);
    root.append(txt('h3', 'ACME accounts'), acmePanel());
    const fmtDate = t => t ? new Date(t).toLocaleString() : '–';

    async function load() {
      try {
        const cs = await api('GET', '/api/v1/certificates');
        tbl.replaceChildren(h('table', { id: 'certs-table' },
          h('tr', {}, ['ID', 'Domains', 'Source', 'Status', 'Issuer', 'Not after', 'Last error', ''].map(x => txt('th', x))),
          cs.map(c => h('tr', { 'data-id': c.id }, txt('td', c.id), h('td', {}, chips(c.domains)), txt('td', c.acme ? 'ACME' : 'uploaded'),
            h('td', {}, txt('span', c.status, 'state ' + c.status)), txt('td', c.issuer || '–'), txt('td', fmtDate(c.not_after), 'mono'),
            txt('td', c.last_error || '', 'muted'),
            h('td', { className: 'actions' },
              c.acme ? mutBtn('Renew', 'small', async () => { const r = await guard(err, null, () => api('POST', '/api/v1/certificates/' + c.id + '/renew')); if (r) err.textContent = ''; load(); }) : null,
              deleteBtn(err, 'certificate #' + c.id + ' (' + c.domains.join(', ') + ')', '/api/v1/certificates/' + c.id, load)))),
          cs.length ? null : h('tr', {}, h('td', { colspan: 8, className: 'muted' }, 'No certificates.'))));
      } catch (e) { err.textContent = e.message; }
    }

    function editForm() {
      const ferr = txt('div', '', 'err');
      const mode = select('mode', [['upload', 'Upload PEM'], ['acme', 'ACME (automatic)']], 'upload');
      const up = [field(h('span', {}, 'Certificate chain (PEM) ', h('span', { className: 'hint' }, 'leaf first')), h('textarea', { name: 'cert', rows: 6, spellcheck: 'false', placeholder: '-----BEGIN CERTIFICATE-----' }), 'wide'),
        field(h('span', {}, 'Private key (PEM) ', h('span', { className: 'hint' }, 'write-only: never shown again')), h('textarea', { name: 'key', rows: 5, spellcheck: 'false', autocomplete: 'off', placeholder: '-----BEGIN PRIVATE KEY-----' }), 'wide')];
      const ac = [field(h('span', {}, 'Domains ', h('span', { className: 'hint' }, 'comma-separated; *.example.com needs dns-01')), h('input', { name: 'domains', placeholder: 'example.com, www.example.com' }), 'wide'),
        field('Challenge', select('challenge', ['http-01', 'tls-alpn-01', 'dns-01'], 'http-01'))];
      const sync = () => { for (const e of up) e.hidden = mode.value !== 'upload'; for (const e of ac) e.hidden = mode.value !== 'acme'; };
      mode.addEventListener('change', sync);
      const f = h('form', { className: 'grid', id: 'cert-form' }, field('Source', mode), up, ac,
        formActions(formBox, 'Add certificate'),
        h('div', { className: 'wide' }, ferr));
      sync();
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const body = mode.value === 'acme' ? { acme: true, domains: list(str(f, 'domains')), challenge: str(f, 'challenge') } : { acme: false, cert: f.elements.cert.value, key: f.elements.key.value };
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          await api('POST', '/api/v1/certificates', body);
          f.elements.key.value = '';
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'certificate', null);
    }
    load();
    S.timer = setInterval(() => { if (formBox.hidden) load(); }, 10000);
  }

  // ---- WASM modules ---------------------------------------------------------------
  const fmtBytes = n => n >= 1048576 ? (n / 1048576).toFixed(1) + ' MiB' : n >= 1024 ? (n / 1024).toFixed(1) + ' KiB' : n + ' B';
  // base64 of an ArrayBuffer, in chunks (String.fromCharCode's argument limit).
  function toBase64(buf) {
    const bytes = new Uint8Array(buf); let bin = '';
    for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(bin);
  }
  function wasmView(root) {
    const err = txt('div', '', 'err');
    err.id = 'wasm-error';
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel mut', hidden: true });
    root.append(h('div', { className: 'row' }, txt('h2', 'WASM modules'), h('span', { className: 'spacer' }), mutBtn('New module', 'primary', () => editForm())),
      h('p', { className: 'muted hint' }, 'proxy-wasm plugin modules (ABI 0.2.x), used by ', h('a', { href: '#plugins' }, 'wasm plugins'),
        ' that name them in config.module. A module is checked when it is uploaded; its bytes are never shown. A module used by plugins cannot be deleted.'),
      formBox, err, tbl);

    async function load() {
      try {
        const [ms, ps] = await Promise.all([api('GET', '/api/v1/wasm-modules'), api('GET', '/api/v1/plugins')]);
        const users = name => ps.filter(p => p.type === 'wasm' && p.config && p.config.module === name);
        tbl.replaceChildren(h('table', { id: 'wasm-table' },
          h('tr', {}, ['ID', 'Name', 'Size', 'SHA-256', 'Used by', 'Created', ''].map(x => txt('th', x))),
          ms.map(m => h('tr', { 'data-id': m.id }, txt('td', m.id), h('td', {}, h('strong', {}, m.name)), txt('td', fmtBytes(m.size_bytes), 'mono'),
            h('td', {}, h('code', { title: m.sha256 }, m.sha256.slice(0, 16) + '…')),
            h('td', {}, users(m.name).length ? users(m.name).map(p => txt('span', 'plugin #' + p.id + (p.enabled ? '' : ' (disabled)'), 'chip')) : txt('span', 'none', 'off')),
            txt('td', new Date(m.created_at).toLocaleString()),
            h('td', { className: 'actions' },
              deleteBtn(err, 'WASM module ' + m.name, '/api/v1/wasm-modules/' + m.id, load)))),
          ms.length ? null : h('tr', {}, h('td', { colspan: 7, className: 'muted' }, 'No WASM modules yet.'))));
      } catch (e) { err.textContent = e.message; }
    }

    function editForm() {
      const ferr = txt('div', '', 'err');
      const mode = select('source', [['file', 'Binary file (.wasm)'], ['wat', 'WebAssembly text (WAT)']], 'file');
      const fileField = field(h('span', {}, 'Module file ', h('span', { className: 'hint' }, 'at most 16 MiB')), h('input', { type: 'file', name: 'file', accept: '.wasm,application/wasm' }), 'wide');
      const watField = field('WAT', h('textarea', { name: 'wat', rows: 10, spellcheck: 'false', placeholder: '(module …)' }), 'wide');
      const sync = () => { fileField.hidden = mode.value !== 'file'; watField.hidden = mode.value !== 'wat'; };
      mode.addEventListener('change', sync);
      const f = h('form', { className: 'grid', id: 'wasm-form' },
        field(h('span', {}, 'Name ', h('span', { className: 'hint' }, 'a-z 0-9 - _, up to 64')), h('input', { name: 'name', required: true, maxlength: 64, pattern: '[a-z0-9_\\-]+' })),
        field('Source', mode), fileField, watField,
        formActions(formBox, 'Upload module'),
        h('div', { className: 'wide' }, ferr));
      sync();
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          const body = { name: str(f, 'name') };
          if (mode.value === 'file') {
            const file = f.elements.file.files[0];
            if (!file) throw new Error('Choose a .wasm file.');
            if (file.size > 16 * 1048576) throw new Error('The module is larger than 16 MiB.');
            body.wasm_base64 = toBase64(await file.arrayBuffer());
          } else body.wat = f.elements.wat.value;
          await api('POST', '/api/v1/wasm-modules', body);
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'WASM module', null, 'name');
    }
    load();
  }

  // ---- settings ------------------------------------------------------------------
  function settingsView(root) {
    const err = txt('div', '', 'err');
    const ok = h('span', { className: 'ok', id: 'settings-saved' });
    const box = h('div', { className: 'panel' }, txt('p', 'Loading…', 'muted'));
    root.append(txt('h2', 'Settings'), h('p', { className: 'muted hint' }, 'Global settings of the gateway. Saving replaces all of them; listener changes are bound at once.' + (isAdmin() ? '' : ' Only admins may change them.')), box);
    async function load() {
      let st;
      try { st = await api('GET', '/api/v1/settings'); } catch (e) { box.replaceChildren(err); err.textContent = e.message; return; }
      const ro = !isAdmin();
      const inp = (name, attrs) => h('input', Object.assign({ name, value: st[name] ?? '', disabled: ro }, attrs || {}));
      const f = h('form', { className: 'grid', id: 'settings-form' },
        field(h('span', {}, 'HTTP listener ', h('span', { className: 'hint' }, 'host:port, empty: off')), inp('http_listen', { placeholder: ':8080' })),
        field(h('span', {}, 'HTTPS listener ', h('span', { className: 'hint' }, 'host:port')), inp('https_listen', { placeholder: ':8443' })),
        h('label', { className: 'check' }, h('input', { type: 'checkbox', name: 'https_enabled', checked: !!st.https_enabled, disabled: ro }), 'HTTPS listener enabled'),
        field(h('span', {}, 'Public URL ', h('span', { className: 'hint' }, 'of this admin UI (SSO, secure cookie)')), inp('public_url', { placeholder: 'https address of this UI' })),
        field('ACME e-mail', inp('acme_email', { type: 'email' })),
        field(h('span', {}, 'ACME directory ', h('span', { className: 'hint' }, 'URL or alias')), inp('acme_directory_url', { list: 'acme-dirs' })),
        h('datalist', { id: 'acme-dirs' }, ['letsencrypt', 'letsencrypt-staging', 'zerossl', 'google', 'google-staging'].map(v => h('option', { value: v }))),
        field(h('span', {}, 'Trusted proxies ', h('span', { className: 'hint' }, 'CIDRs or IPs, comma-separated')), h('input', { name: 'trusted_proxies', value: (st.trusted_proxies || []).join(', '), disabled: ro }), 'wide'),
        h('label', { className: 'check wide' }, h('input', { type: 'checkbox', name: 'allow_link_local_destinations', checked: !!st.allow_link_local_destinations, disabled: ro }),
          'Allow link-local and cloud metadata destinations ', h('span', { className: 'hint' }, '169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200: targets, http-log endpoints, probes')),
        h('label', { className: 'check' }, h('input', { type: 'checkbox', name: 'http3', checked: !!st.http3, disabled: ro }), 'HTTP/3 on the HTTPS listener'),
        h('label', { className: 'check' }, h('input', { type: 'checkbox', name: 'h2c', checked: !!st.h2c, disabled: ro }), 'Cleartext HTTP/2 (h2c) on the HTTP listener'),
        h('div', { className: 'row wide' }, h('button', { type: 'submit', className: 'primary mut adm' }, 'Save settings'), ok,
          txt('span', 'Last changed ' + (st.updated_at ? new Date(st.updated_at).toLocaleString() : '–'), 'hint')),
        h('div', { className: 'wide' }, err));
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        ok.textContent = '';
        // PUT is a full replacement: every field is sent.
        const body = { http_listen: str(f, 'http_listen'), https_listen: str(f, 'https_listen'), https_enabled: bool(f, 'https_enabled'), public_url: str(f, 'public_url'),
          acme_email: str(f, 'acme_email'), acme_directory_url: str(f, 'acme_directory_url'), trusted_proxies: list(str(f, 'trusted_proxies')),
          allow_link_local_destinations: bool(f, 'allow_link_local_destinations'), http3: bool(f, 'http3'), h2c: bool(f, 'h2c') };
        guard(err, f.querySelector('button[type=submit]'), async () => { await api('PUT', '/api/v1/settings', body); await load(); ok.textContent = 'Saved.'; });
      });
      box.replaceChildren(f);
    }
    load();
  }

  // ---- users, admin token, SSO (admin) ----------------------------------------------
  function usersView(root) {
    root.append(txt('h2', 'Users and access'));
    if (!isAdmin()) { root.append(txt('p', 'Only admins manage users, the admin token and single sign-on.', 'muted')); return; }
    const err = txt('div', '', 'err');
    const tbl = h('div', { className: 'tablewrap' });
    const formBox = h('div', { className: 'panel', hidden: true });
    const tokenBox = h('div', { className: 'panel', id: 'token-panel' });
    const ssoBox = h('div', { className: 'panel', id: 'sso-panel' });
    root.append(h('div', { className: 'row' }, txt('h3', 'Users'), h('span', { className: 'spacer' }), admBtn('New user', 'primary', () => editForm(null))), formBox, err, tbl,
      h('div', { className: 'cols' }, h('div', {}, txt('h3', 'Admin token'), tokenBox), h('div', {}, txt('h3', 'Single sign-on (OpenID Connect)'), ssoBox)));

    // In open mode the first user or token turns authentication on: sign in again.
    async function afterAuthChange(message) {
      const st = await api('GET', '/api/v1/admin/status');
      S.status = st;
      if (S.me.method === 'open' && st.auth_enabled && !S.token) { S.me = null; showLogin(message); return true; }
      return false;
    }

    async function load() {
      try {
        const us = await api('GET', '/api/v1/users');
        tbl.replaceChildren(h('table', { id: 'users-table' },
          h('tr', {}, ['ID', 'E-mail', 'Name', 'Role', 'Sign-in', 'Last sign-in', 'Created', ''].map(x => txt('th', x))),
          us.map(u => h('tr', { 'data-id': u.id }, txt('td', u.id), h('td', {}, h('strong', {}, u.email)), txt('td', u.name || '–'), h('td', {}, txt('span', u.role, 'chip')),
            txt('td', (u.has_password ? 'password' : 'SSO only') + (u.sso_linked ? ' · SSO linked' : ''), u.has_password ? '' : 'muted'), txt('td', u.last_login_at ? new Date(u.last_login_at).toLocaleString() : 'never', u.last_login_at ? '' : 'off'),
            txt('td', new Date(u.created_at).toLocaleString()),
            h('td', { className: 'actions' },
              admBtn('Edit', 'small', () => editForm(u)),
              deleteBtn(err, 'user ' + u.email + ' (their sessions end at once)', '/api/v1/users/' + u.id, load, admBtn)))),
          us.length ? null : h('tr', {}, h('td', { colspan: 8, className: 'muted' }, 'No users: the API is protected by the admin token only, or open.'))));
      } catch (e) { err.textContent = e.message; }
    }

    function editForm(u) {
      const ferr = txt('div', '', 'err');
      const f = h('form', { className: 'grid', id: 'user-form' },
        field('E-mail', h('input', { name: 'email', type: 'email', required: true, value: u ? u.email : '', autocomplete: 'off' })),
        field('Name', h('input', { name: 'name', value: u ? u.name : '' })),
        field('Role', select('role', ['viewer', 'editor', 'admin'], u ? u.role : (S.me.method === 'open' ? 'admin' : 'viewer'))),
        field(h('span', {}, 'Password ', h('span', { className: 'hint' }, u ? 'leave empty to keep; a new one ends their sessions' : 'at least 8 characters; empty for SSO only')),
          h('input', { name: 'password', type: 'password', autocomplete: 'new-password', minlength: 8 })),
        formActions(formBox, u ? 'Save user' : 'Create user', 'row wide',
          !u && S.me.method === 'open' ? txt('span', 'The first user turns authentication on: you will sign in with it.', 'hint') : null),
        h('div', { className: 'wide' }, ferr));
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const body = { email: str(f, 'email'), name: str(f, 'name'), role: str(f, 'role') };
        if (f.elements.password.value) body.password = f.elements.password.value;
        guard(ferr, f.querySelector('button[type=submit]'), async () => {
          await save('/api/v1/users', u, body);
          f.elements.password.value = '';
          if (await afterAuthChange('Authentication is now on: sign in with the user you created.')) return;
          formBox.hidden = true; load();
        });
      });
      openForm(formBox, f, 'user', u, 'email');
    }

    async function loadToken(shown) {
      const terr = txt('div', '', 'err');
      let st = S.status;
      try { st = await api('GET', '/api/v1/admin/status'); S.status = st; } catch (e) { terr.textContent = e.message; }
      const gen = admBtn(st.token_enabled ? 'Rotate token' : 'Generate token', 'primary', () => {
        if (st.token_enabled && !window.confirm('Rotate the admin token? The current one stops working at once.')) return;
        guard(terr, gen, async () => {
          const r = await api('POST', '/api/v1/admin/token');
          // The caller keeps working: with the token (or in open mode) the page switches to the new one.
          if (S.me.method === 'token' || S.me.method === 'open') {
            S.token = r.token; sessionStorage.setItem(TOKEN_KEY, r.token);
            if (S.me.method === 'open') { S.newToken = r; S.me = await api('GET', '/api/v1/auth/me'); enter(); return; }
          }
          loadToken(r);
        });
      });
      const del = st.token_enabled ? admBtn('Revoke token', 'danger', () => {
        if (!window.confirm(st.users_exist ? 'Revoke the admin token? Users keep protecting the API.' : 'Revoke the admin token? Without users the API becomes OPEN to anyone who can reach it.')) return;
        guard(terr, del, async () => {
          const nst = await api('DELETE', '/api/v1/admin/token');
          S.status = nst;
          if (S.me.method === 'token') { S.token = ''; sessionStorage.removeItem(TOKEN_KEY); S.me = null; return boot(); }
          loadToken();
        });
      }) : null;
      tokenBox.replaceChildren(h('div', {},
        h('p', {}, 'Status: ', st.token_enabled ? txt('strong', 'set', 'ok') : txt('strong', 'not set', 'off'), st.auth_enabled ? '' : ' · the API is open (no token, no users)'),
        shown ? h('div', { id: 'new-token' }, h('p', {}, h('strong', {}, 'New admin token: copy it now, it is not shown again.')),
          h('div', { className: 'secret', id: 'new-token-value' }, shown.token),
          h('div', { className: 'row' }, h('button', { type: 'button', className: 'small', onclick: ev => copy(shown.token, ev.target) }, 'Copy'), txt('span', shown.note || '', 'hint'))) : null,
        h('div', { className: 'row' }, gen, del), terr,
        h('p', { className: 'hint' }, 'Use it as Authorization: Bearer <token> or X-Admin-Token. Only its SHA-256 is stored.')));
    }

    async function loadSSO() {
      const serr = txt('div', '', 'err');
      const ok = h('span', { className: 'ok' });
      let st;
      try { st = await api('GET', '/api/v1/sso/config'); } catch (e) { ssoBox.replaceChildren(serr); serr.textContent = e.message; return; }
      const c = st.config || {};
      const f = h('form', { className: 'grid', id: 'sso-form' },
        field(h('span', {}, 'Issuer ', h('span', { className: 'hint' }, 'https (http only for localhost)')), h('input', { name: 'issuer', type: 'url', required: true, value: c.issuer || '' }), 'wide'),
        field('Client id', h('input', { name: 'client_id', required: true, value: c.client_id || '' })),
        field(h('span', {}, 'Client secret ', h('span', { className: 'hint' }, c.client_secret_set ? 'set · leave empty to keep' : 'write-only; empty: public client')),
          h('input', { name: 'client_secret', type: 'password', autocomplete: 'off', placeholder: c.client_secret_set ? '•••••••• (leave empty to keep)' : '' })),
        c.client_secret_set ? check('Remove the stored secret', 'remove_secret', false) : null,
        field('Button label', h('input', { name: 'label', value: c.label || 'Sign in with SSO' })),
        field(h('span', {}, 'Auto-provision role ', h('span', { className: 'hint' }, 'none: only existing users')), select('auto_provision_role', [['', 'none'], 'viewer', 'editor', 'admin'], c.auto_provision_role || '')),
        field(h('span', {}, 'Allowed e-mail domains ', h('span', { className: 'hint' }, 'comma-separated; empty: any')), h('input', { name: 'allowed_domains', value: (c.allowed_domains || []).join(', ') }), 'wide'),
        h('div', { className: 'row wide' }, admBtn('Save SSO', 'primary', null), st.enabled ? admBtn('Disable SSO', 'danger', async ev => {
          if (!window.confirm('Disable single sign-on? SSO-only accounts cannot sign in until they get a password.')) return;
          await guard(serr, ev.target, () => api('DELETE', '/api/v1/sso/config')); loadSSO();
        }) : null, ok),
        h('div', { className: 'wide' }, serr),
        h('p', { className: 'hint wide' }, 'Redirect URI: ', h('code', {}, location.origin + '/api/v1/auth/sso/callback'), ' (or the public URL of Settings, when set, + /api/v1/auth/sso/callback).'));
      const save = f.querySelector('button.primary'); save.type = 'submit';
      f.addEventListener('submit', ev => {
        ev.preventDefault();
        const body = { issuer: str(f, 'issuer'), client_id: str(f, 'client_id'), label: str(f, 'label'), auto_provision_role: str(f, 'auto_provision_role') || null, allowed_domains: list(str(f, 'allowed_domains')) };
        if (f.elements.client_secret.value) body.client_secret = f.elements.client_secret.value;
        else if (f.elements.remove_secret && f.elements.remove_secret.checked) body.client_secret = '';
        guard(serr, save, async () => { await api('PUT', '/api/v1/sso/config', body); await loadSSO(); ssoBox.querySelector('.ok').textContent = 'Saved.'; });
      });
      ssoBox.replaceChildren(h('p', {}, 'Status: ', st.enabled ? txt('strong', 'enabled', 'ok') : txt('strong', 'not configured', 'off')), f);
    }
    load(); loadToken(S.newToken); loadSSO();
    if (S.focus === 'new') editForm(null);
    S.newToken = null;
  }

  function copy(text, btn) {
    const done = () => { if (btn) { btn.textContent = 'Copied'; setTimeout(() => { btn.textContent = 'Copy'; }, 1500); } };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, () => selectText());
    else selectText();
    function selectText() { const e = document.getElementById('new-token-value'); if (e) { const r = document.createRange(); r.selectNodeContents(e); const s = getSelection(); s.removeAllRanges(); s.addRange(r); } if (btn) btn.textContent = 'Selected: press Ctrl+C'; }
  }

  // ---- backup: export and import ----------------------------------------------------
  function backupView(root) {
    const err = txt('div', '', 'err');
    const secrets = h('input', { type: 'checkbox', name: 'include_secrets' });
    const link = h('a', { href: '/api/v1/export', id: 'export-link', download: 'gateway-export.json' }, h('button', { type: 'button', className: 'primary' }, 'Download export'));
    const sync = () => { link.href = '/api/v1/export' + (secrets.checked ? '?include_secrets=true' : ''); link.download = 'gateway-export' + (secrets.checked ? '-with-secrets' : '') + '.json'; };
    secrets.addEventListener('change', sync);
    link.addEventListener('click', ev => {
      // A plain link carries the session cookie but not the admin token:
      // the file is fetched with the page's credentials instead.
      ev.preventDefault();
      guard(err, null, async () => {
        const headers = { Accept: 'application/json' };
        if (S.token) headers.Authorization = 'Bearer ' + S.token;
        const resp = await fetch(link.href, { headers, credentials: 'same-origin' });
        if (!resp.ok) { let m = resp.status + ' ' + resp.statusText; try { m = (await resp.json()).error || m; } catch (e) { /* not JSON */ } throw new Error(m); }
        const url = URL.createObjectURL(await resp.blob());
        const a = h('a', { href: url, download: link.download });
        document.body.append(a); a.click(); a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      });
    });
    const ierr = txt('div', '', 'err');
    const report = h('div', { id: 'import-report' });
    const f = h('form', { className: 'grid mut adm', id: 'import-form' },
      field('Export document (JSON)', h('input', { type: 'file', name: 'file', accept: '.json,application/json', required: true }), 'wide'),
      h('div', { className: 'row wide' }, h('button', { type: 'submit', className: 'danger mut adm' }, 'Import and replace the configuration')));
    f.addEventListener('submit', ev => {
      ev.preventDefault();
      const file = f.elements.file.files[0];
      if (!file) return;
      if (!window.confirm('Import ' + file.name + '? It REPLACES the whole routing configuration (services, routes, plugins, consumers, settings…).')) return;
      report.replaceChildren();
      guard(ierr, f.querySelector('button'), async () => {
        let doc;
        try { doc = JSON.parse(await file.text()); } catch (e) { throw new Error(file.name + ' is not JSON: ' + e.message); }
        const r = await api('POST', '/api/v1/import', doc);
        report.replaceChildren(h('div', { className: 'panel' }, h('p', {}, h('strong', { className: 'ok' }, 'Imported ' + file.name + '.')),
          txt('h3', 'Restored'), h('div', { className: 'cards' }, Object.entries(r.restored || {}).map(([k, v]) => card(k.replace(/_/g, ' '), v))),
          txt('h3', 'Skipped · ' + (r.skipped || []).length),
          (r.skipped || []).length ? h('div', { className: 'tablewrap' }, h('table', { id: 'import-skipped' }, h('tr', {}, txt('th', 'Kind'), txt('th', 'Where'), txt('th', 'Reason')),
            r.skipped.map(s => h('tr', {}, txt('td', s.kind), txt('td', s.ref, 'mono'), txt('td', s.reason))))) : txt('p', 'Nothing was skipped.', 'muted')));
        f.reset();
      });
    });
    root.append(txt('h2', 'Backup'),
      h('div', { className: 'cols' },
        h('div', { className: 'panel' }, txt('h3', 'Export'),
          h('p', { className: 'muted' }, 'The whole routing configuration as one JSON document. Users, sessions, SSO settings and the admin token are never exported.'),
          h('label', { className: 'check adm' }, secrets, 'Include secrets (credentials keys, password hashes, jwt secrets)'),
          h('p', { className: 'hint adm' }, 'A document with secrets restores a working gateway: keep it as safe as a password.'),
          h('div', { className: 'row' }, link), err),
        h('div', { className: 'panel' }, txt('h3', 'Import'),
          isAdmin() ? h('p', { className: 'muted' }, 'Replaces the routing configuration by an export document in one transaction; on any error nothing changes. Items that cannot be restored are listed with the reason.')
            : txt('p', 'Only admins may import a configuration.', 'muted'),
          f, ierr)),
      report);
    sync();
  }

  // ---- own account: password change ---------------------------------------------------
  function accountView(root) {
    root.append(txt('h2', 'Account'));
    if (S.me.method !== 'session' || !S.me.user) {
      root.append(txt('p', S.me.method === 'token' ? 'You are signed in with the admin token: it has no password.' : 'Open mode: there is no account.', 'muted'));
      return;
    }
    const u = S.me.user;
    const err = txt('div', '', 'err');
    const ok = h('span', { className: 'ok', id: 'password-saved' });
    const f = h('form', { className: 'grid', id: 'password-form' },
      u.has_password ? field('Current password', h('input', { type: 'password', name: 'current_password', autocomplete: 'current-password', required: true })) : null,
      field(h('span', {}, 'New password ', h('span', { className: 'hint' }, 'at least 8 characters')), h('input', { type: 'password', name: 'new_password', autocomplete: 'new-password', minlength: 8, required: true })),
      field('Repeat the new password', h('input', { type: 'password', name: 'repeat', autocomplete: 'new-password', minlength: 8, required: true })),
      h('div', { className: 'row wide' }, h('button', { type: 'submit', className: 'primary' }, u.has_password ? 'Change password' : 'Set a password'), ok),
      h('div', { className: 'wide' }, err));
    f.addEventListener('submit', ev => {
      ev.preventDefault();
      ok.textContent = '';
      if (f.elements.new_password.value !== f.elements.repeat.value) { err.textContent = 'The two new passwords differ.'; return; }
      const body = { new_password: f.elements.new_password.value };
      if (f.elements.current_password) body.current_password = f.elements.current_password.value;
      guard(err, f.querySelector('button'), async () => {
        await api('PUT', '/api/v1/auth/me/password', body);
        f.reset(); u.has_password = true;
        ok.textContent = 'Password changed. Your other sessions have ended.';
      });
    });
    root.append(h('div', { className: 'panel' }, h('p', {}, h('strong', {}, u.name || u.email), ' · ', u.email, ' · ', txt('span', u.role, 'chip')), f));
  }

  boot();
})();
