// server/web/page.js: the search page (GET /). Document text is only ever put in the page as
// text nodes (textContent, createTextNode): never as markup, so a document holding <script> or an
// <img onerror> shows those characters and runs nothing. The state is the URL (/?q=...&mode=...).
'use strict';
(function () {
  const MODES = { hybrid: 'hybrid', meaning: 'vector', words: 'keyword', vector: 'vector', keyword: 'keyword' };
  const NAMES = { hybrid: 'hybrid', vector: 'meaning', keyword: 'words' };
  const SAID = { hybrid: 'meaning and words', vector: 'meaning', keyword: 'words' };
  const $ = (id) => document.getElementById(id);
  const form = $('form'), q = $('q'), status = $('status'), list = $('list'), storeLine = $('store');
  const keyform = $('keyform'), keyInput = $('key');
  let pendingRetry = null;
  let seq = 0;

  function key() { try { return sessionStorage.getItem('modattn-key') || ''; } catch (e) { return ''; } }

  // fetch with the key (if one was given); a 401 asks for the key once and retries
  async function api(path, body) {
    const headers = {};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const k = key();
    if (k) headers['Authorization'] = 'Bearer ' + k;
    const res = await fetch(path, { method: body === undefined ? 'GET' : 'POST', headers,
                                    body: body === undefined ? undefined : JSON.stringify(body) });
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    return { status: res.status, data };
  }

  function askKey(retry, wrong) {
    pendingRetry = retry;
    $('keywhy').textContent = wrong ? 'That API key was refused; try another.' : 'This server needs an API key.';
    keyform.hidden = false;
    keyInput.focus();
  }

  keyform.addEventListener('submit', (ev) => {
    ev.preventDefault();
    try { sessionStorage.setItem('modattn-key', keyInput.value.trim()); } catch (e) { /* private mode */ }
    keyInput.value = '';
    keyform.hidden = true;
    const r = pendingRetry;
    pendingRetry = null;
    if (r) r();
    q.focus();
  });

  function say(text, bad) {
    status.textContent = text;
    status.classList.toggle('bad', !!bad);
  }

  function errorText(r) {
    return r.data && r.data.error && typeof r.data.error.message === 'string' ? r.data.error.message : 'HTTP ' + r.status;
  }

  function ago(iso) {
    const t = Date.parse(iso);
    if (isNaN(t)) return '';
    const s = Math.max(0, (Date.now() - t) / 1000);
    if (s < 90) return 'just now';
    if (s < 5400) return Math.round(s / 60) + ' minutes ago';
    if (s < 129600) return Math.round(s / 3600) + ' hours ago';
    return Math.round(s / 86400) + ' days ago';
  }

  async function loadInfo() {
    const r = await api('/info');
    if (r.status === 401) { storeLine.textContent = 'Store details need the API key.'; return r; }
    if (r.status !== 200 || !r.data) { storeLine.textContent = 'Store details unavailable: ' + errorText(r); return r; }
    const d = r.data, st = d.store;
    const model = 'model ' + d.model_id + ' (' + d.dimension + ' dimensions)';
    if (!st) {
      storeLine.textContent = 'No store: this server was started without --db, so there is nothing to search. ' + model;
      showTools('Search is off: this server was started without a store (--db). The model alone still answers these:');
    } else if (!st.available) {
      storeLine.textContent = 'The store cannot be read: ' + (st.error || 'unknown error') + '. ' + model;
      showTools('Search is off: the store cannot be read. The model alone still answers these:');
    } else {
      const when = st.modified ? ' · last indexed ' + st.modified.replace('T', ' ').replace('Z', ' UTC') + ' (' + ago(st.modified) + ')' : '';
      storeLine.textContent = st.documents + ' documents, ' + st.chunks + ' chunks · ' + model + when;
    }
    return r;
  }

  // ---- the embedding-only tools, for a server without a store: POST /tokenize and the cosine
  // similarity of two texts from POST /v1/embeddings (the vectors are L2-normalised by the
  // server; the cosine is computed in full anyway, so that it does not depend on that)
  const tools = $('tools');
  function showTools(why) {
    $('tools-why').textContent = why;
    tools.hidden = false;
  }

  function needKey(r, retry) {
    if (r.status !== 401) return false;
    askKey(retry, !!key());
    return true;
  }

  $('tokform').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = $('tok-text').value;
    const out = $('tok-out'), said = $('tok-status');
    said.textContent = 'Tokenizing\u2026';
    const r = await api('/tokenize', { inputs: text });
    if (needKey(r, () => $('tokform').requestSubmit())) { said.textContent = 'This server needs an API key.'; return; }
    out.replaceChildren();
    if (r.status !== 200 || !Array.isArray(r.data) || !Array.isArray(r.data[0])) {
      said.textContent = 'Tokenizing failed: ' + errorText(r);
      return;
    }
    const toks = r.data[0];
    for (const t of toks) {
      const li = document.createElement('li');
      li.textContent = String(t.text);
      li.title = 'id ' + Number(t.id) + (t.special ? ' (special)' : '');
      if (t.special) li.className = 'special';
      out.appendChild(li);
    }
    said.textContent = toks.length + (toks.length === 1 ? ' token' : ' tokens') + ' (ids: ' +
      toks.map((t) => Number(t.id)).join(' ') + ')';
  });

  $('simform').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const a = $('sim-a').value, b = $('sim-b').value, out = $('sim-out');
    out.classList.remove('bad');
    out.textContent = 'Comparing\u2026';
    const r = await api('/v1/embeddings', { input: [a, b] });
    if (needKey(r, () => $('simform').requestSubmit())) { out.textContent = 'This server needs an API key.'; return; }
    const d = r.data && Array.isArray(r.data.data) ? r.data.data : null;
    if (r.status !== 200 || !d || d.length !== 2) {
      out.classList.add('bad');
      out.textContent = 'Comparing failed: ' + errorText(r);
      return;
    }
    const u = d[0].embedding, v = d[1].embedding;
    let dot = 0, nu = 0, nv = 0;
    for (let i = 0; i < u.length; i++) { dot += u[i] * v[i]; nu += u[i] * u[i]; nv += v[i] * v[i]; }
    const cos = nu > 0 && nv > 0 ? dot / Math.sqrt(nu * nv) : 0;
    out.dataset.cosine = String(cos);
    out.textContent = 'Cosine similarity ' + cos.toFixed(4) + ' (1 is the same meaning, 0 unrelated).';
  });

  // byte offsets of the UTF-8 text -> the bytes [from, to) of it cut in pieces, marked or not (a
  // mark that crosses from or to is cut there)
  function pieces(bytes, spans, from, to) {
    const dec = new TextDecoder();
    const out = [];
    let at = from;
    const sorted = (Array.isArray(spans) ? spans : []).filter((s) => Array.isArray(s) && s.length === 2)
      .map((s) => [Math.max(from, s[0] | 0), Math.min(to, s[1] | 0)]).sort((a, b) => a[0] - b[0]);
    for (const [s, e] of sorted) {
      if (s < at || e <= s) continue;
      if (s > at) out.push([dec.decode(bytes.subarray(at, s)), false]);
      out.push([dec.decode(bytes.subarray(s, e)), true]);
      at = e;
    }
    if (at < to) out.push([dec.decode(bytes.subarray(at, to)), false]);
    return out;
  }

  // The snippet: the byte range [start, end) of the text that the library chose (r.snippet, from
  // pipeline/snippet.c: the window with the most distinct query words, or for a chunk found by
  // meaning alone the window nearest the query by meaning; the CLI and Python show the same one),
  // with the marks inside it and an ellipsis where it does not reach the text's start or end.
  function snippet(r) {
    const bytes = new TextEncoder().encode(String(r.text));
    const n = bytes.length, sn = r.snippet;
    if (!Array.isArray(sn) || sn.length !== 2 || typeof sn[0] !== 'number' || typeof sn[1] !== 'number') {
      // An older server gives no snippet: fall back to the page's own cut (about 400 characters
      // around the first marked word), as the page did before the library chose snippets.
      return cutAroundFirstMark(pieces(bytes, r.highlights, 0, n));
    }
    let from = Math.min(n, Math.max(0, Math.floor(sn[0]))), to = Math.min(n, Math.max(from, Math.floor(sn[1])));
    // (the library cuts on a character's first byte; a range that did not would show U+FFFD)
    while (from > 0 && (bytes[from] & 0xc0) === 0x80) from--;
    while (to < n && (bytes[to] & 0xc0) === 0x80) to++;
    const out = pieces(bytes, r.highlights, from, to);
    if (from > 0) out.unshift(['\u2026', false]);
    if (to < n) out.push(['\u2026', false]);
    return out;
  }

  // the fallback for a server without "snippet": about 400 characters around the first marked word
  function cutAroundFirstMark(parts) {
    const total = parts.reduce((n, p) => n + p[0].length, 0);
    if (total <= 480) return parts;
    let first = 0, pos = 0;
    for (const p of parts) { if (p[1]) { first = pos; break; } pos += p[0].length; }
    const from = Math.max(0, first - 120), to = from + 420;
    const out = [];
    pos = 0;
    for (const [t, m] of parts) {
      const s = Math.max(pos, from), e = Math.min(pos + t.length, to);
      if (e > s) out.push([t.slice(s - pos, e - pos), m]);
      pos += t.length;
    }
    if (from > 0) out.unshift(['\u2026', false]);
    if (to < total) out.push(['\u2026', false]);
    return out;
  }

  function render(results) {
    list.replaceChildren();
    results.forEach((r) => {
      const li = document.createElement('li');
      const h = document.createElement('h2');
      h.className = 'path';
      h.textContent = String(r.path);
      const meta = document.createElement('p');
      meta.className = 'meta';
      const where = r.page != null ? 'page ' + r.page : r.line != null ? 'line ' + r.line : '';
      meta.textContent = [where, 'score ' + Number(r.score).toFixed(4), r.kind].filter(Boolean).join(' · ');
      const p = document.createElement('p');
      p.className = 'snippet';
      for (const [t, marked] of snippet(r)) {
        if (marked) {
          const m = document.createElement('mark');
          m.textContent = t;
          p.appendChild(m);
        } else p.appendChild(document.createTextNode(t));
      }
      const actions = document.createElement('div');
      actions.className = 'actions';
      const more = document.createElement('button');
      more.type = 'button';
      more.className = 'secondary';
      more.textContent = 'More like this';
      more.setAttribute('aria-label', 'More like this: ' + String(r.path) + (where ? ', ' + where : ''));
      more.addEventListener('click', () => {
        // (a query is cut to the model's 256 tokens anyway; 600 characters keep the URL well within
        // the server's 8 KiB for any script)
        const text = String(r.text).slice(0, 600);
        go(text, 'meaning', true);
        q.focus();
      });
      actions.append(meta, more);
      li.append(h, p, actions);
      list.appendChild(li);
    });
  }

  async function search(text, modeName) {
    const my = ++seq;
    if (!text) { list.replaceChildren(); say(''); return; }
    say('Searching\u2026');
    const r = await api('/search', { query: text, k: 10, mode: MODES[modeName] || 'hybrid' });
    if (my !== seq) return; // a newer search started
    if (r.status === 401) {
      say('This server needs an API key.', true);
      askKey(() => { loadInfo(); search(text, modeName); }, !!key());
      return;
    }
    if (r.status === 503 && r.data && r.data.error && /store|--db/i.test(r.data.error.message)) {
      list.replaceChildren();
      say('No store to search: ' + errorText(r), true);
      return;
    }
    if (r.status !== 200 || !r.data || !Array.isArray(r.data.results)) {
      list.replaceChildren();
      say('The search failed: ' + errorText(r), true);
      return;
    }
    render(r.data.results);
    const n = r.data.results.length;
    say(n === 0 ? 'No results for \u201c' + text + '\u201d.' : n + (n === 1 ? ' result' : ' results') + ' by ' +
        (SAID[r.data.mode] || r.data.mode) + ' for \u201c' + (text.length > 80 ? text.slice(0, 80) + '\u2026' : text) + '\u201d.');
  }

  function modeFromForm() {
    const c = form.querySelector('input[name=mode]:checked');
    return c ? c.value : 'hybrid';
  }

  function fromUrl() {
    const u = new URLSearchParams(location.search);
    const text = u.get('q') || '';
    let mode = u.get('mode') || 'hybrid';
    mode = NAMES[MODES[mode]] ? (mode === 'vector' ? 'meaning' : mode === 'keyword' ? 'words' : mode) : 'hybrid';
    q.value = text;
    const radio = form.querySelector('input[name=mode][value="' + mode + '"]');
    if (radio) radio.checked = true;
    search(text.trim(), mode);
  }

  function go(text, mode, push) {
    const u = new URLSearchParams();
    u.set('q', text);
    u.set('mode', mode);
    const url = '/?' + u.toString();
    if (push && url !== location.pathname + location.search) history.pushState(null, '', url);
    q.value = text;
    const radio = form.querySelector('input[name=mode][value="' + mode + '"]');
    if (radio) radio.checked = true;
    search(text.trim(), mode);
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    go(q.value, modeFromForm(), true);
  });
  form.querySelectorAll('input[name=mode]').forEach((el) => el.addEventListener('change', () => {
    if (q.value.trim()) go(q.value, modeFromForm(), true);
  }));
  window.addEventListener('popstate', fromUrl);

  loadInfo().then((r) => {
    if (r.status === 401 && !new URLSearchParams(location.search).get('q')) askKey(() => loadInfo(), !!key());
  });
  fromUrl();
}());
