// server/web/docs.js: GET /docs, the API documentation, drawn from the server's own
// /openapi.json: every route with its parameters, request body and answers, every schema, and a
// form per route to try it. All text goes in as text nodes (never markup).
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const el = (tag, props, ...kids) => {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    for (const k of kids) e.append(k);
    return e;
  };
  let spec = null;
  function key() { try { return sessionStorage.getItem('modattn-key') || ''; } catch (e) { return ''; } }
  async function call(method, path, body) {
    const headers = {};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (key()) headers['Authorization'] = 'Bearer ' + key();
    const res = await fetch(path, { method, headers, body });
    return { status: res.status, type: res.headers.get('Content-Type') || '', text: await res.text() };
  }
  function resolve(s) {
    let guard = 0;
    while (s && s.$ref && guard++ < 16) {
      const parts = s.$ref.replace(/^#\//, '').split('/');
      s = parts.reduce((o, p) => (o ? o[p] : undefined), spec);
    }
    return s || {};
  }
  // a small example body from a schema: required fields and their first alternative
  function example(s, depth) {
    s = resolve(s);
    if (depth > 4) return null;
    if (s.example !== undefined) return s.example;
    if (s.oneOf) return example(s.oneOf[0], depth + 1);
    if (s.enum) return s.enum.find((v) => v !== null);
    switch (s.type) {
    case 'object': {
      const o = {};
      for (const k of s.required || []) o[k] = example((s.properties || {})[k] || {}, depth + 1);
      return o;
    }
    case 'array': return [example(s.items || {}, depth + 1)];
    case 'integer': return s.minimum !== undefined ? s.minimum : 1;
    case 'number': return 1;
    case 'boolean': return true;
    case 'string': return 'honey';
    default: return null;
    }
  }
  function askKey(retry, wrong) {
    $('keywhy').textContent = wrong ? 'That API key was refused; try another.' : 'This server needs an API key.';
    $('keyform').hidden = false;
    $('key').focus();
    $('keyform').onsubmit = (ev) => {
      ev.preventDefault();
      try { sessionStorage.setItem('modattn-key', $('key').value.trim()); } catch (e) { /* private mode */ }
      $('key').value = '';
      $('keyform').hidden = true;
      retry();
    };
  }
  function tryForm(method, path, op) {
    const f = el('form', { className: 'try' });
    const params = (op.parameters || []).filter((p) => p.in === 'path');
    const inputs = {};
    for (const p of params) {
      const id = 'p-' + method + path.replace(/[^a-z0-9]/gi, '-') + '-' + p.name;
      inputs[p.name] = el('input', { id, type: 'text', value: String(example(p.schema || {}, 0) || '') });
      f.append(el('label', { htmlFor: id, textContent: p.name }), el('div', { className: 'row' }, inputs[p.name]));
    }
    let ta = null;
    const rb = op.requestBody && op.requestBody.content && op.requestBody.content['application/json'];
    if (rb) {
      const id = 'b-' + method + path.replace(/[^a-z0-9]/gi, '-');
      ta = el('textarea', { id, rows: 4, value: JSON.stringify(example(rb.schema, 0), null, 1) });
      f.append(el('label', { htmlFor: id, textContent: 'Request body (JSON)' }), ta);
    }
    const out = el('pre', { className: 'out' });
    out.setAttribute('aria-live', 'polite');
    f.append(el('div', { className: 'row' }, el('button', { type: 'submit', textContent: 'Try it: ' + method.toUpperCase() + ' ' + path })), out);
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      let url = path;
      for (const p of params) url = url.replace('{' + p.name + '}', encodeURIComponent(inputs[p.name].value));
      out.textContent = 'Sending\u2026';
      const r = await call(method.toUpperCase(), url, ta ? ta.value : undefined);
      let text = r.text;
      if (/json/.test(r.type)) { try { text = JSON.stringify(JSON.parse(text), null, 1); } catch (e) { /* as sent */ } }
      if (text.length > 20000) text = text.slice(0, 20000) + '\n\u2026';
      out.textContent = r.status + '\n' + text;
      if (r.status === 401) askKey(() => f.requestSubmit(), !!key());
    });
    return f;
  }
  function draw() {
    $('about').textContent = (spec.info && spec.info.title ? spec.info.title + ' ' : '') +
      (spec.info && spec.info.version ? 'version ' + spec.info.version + '. ' : '') + (spec.info && spec.info.description || '');
    const toc = $('toc'), routes = $('routes');
    for (const [path, item] of Object.entries(spec.paths || {})) {
      for (const [method, op] of Object.entries(item)) {
        if (typeof op !== 'object' || !op.responses) continue;
        const id = 'op-' + (op.operationId || method + path.replace(/[^a-z0-9]/gi, '-'));
        toc.append(el('li', {}, el('a', { href: '#' + id, textContent: method.toUpperCase() + ' ' + path })));
        const art = el('article', { id, className: 'op' });
        art.append(el('h2', { textContent: method.toUpperCase() + ' ' + path }));
        if (op.summary) art.append(el('p', { textContent: op.summary }));
        if (op.description) art.append(el('p', { className: 'hint', textContent: op.description }));
        const rb = op.requestBody && op.requestBody.content;
        if (rb) {
          const p = el('p', {}, 'Request body: ');
          Object.entries(rb).forEach(([t, c], i) => {
            p.append((i ? ', ' : '') + t);
            if (c.schema && c.schema.$ref) {
              const n = c.schema.$ref.split('/').pop();
              p.append(': ', el('a', { href: '#schema-' + n, textContent: n }));
            }
          });
          art.append(p);
        }
        const ul = el('ul');
        for (const [code, resp] of Object.entries(op.responses)) {
          const r = resolve(resp);
          const c = r.content ? Object.entries(r.content).map(([t, x]) => t + (x.schema && x.schema.$ref ? ' (' + x.schema.$ref.split('/').pop() + ')' : '')).join(', ') : '';
          ul.append(el('li', { textContent: code + ': ' + (r.description || '') + (c ? ' \u2014 ' + c : '') }));
        }
        art.append(el('h3', { textContent: 'Answers' }), ul, tryForm(method, path, op));
        routes.append(art);
      }
    }
    const sch = $('schemas');
    for (const [name, s] of Object.entries((spec.components && spec.components.schemas) || {})) {
      sch.append(el('h3', { id: 'schema-' + name, textContent: name }), el('pre', { className: 'out', textContent: JSON.stringify(s, null, 1) }));
    }
    $('status').textContent = Object.keys(spec.paths || {}).length + ' routes.';
  }
  async function load() {
    const r = await call('GET', '/openapi.json');
    if (r.status === 401) { $('status').textContent = 'The API description needs the API key.'; askKey(load, !!key()); return; }
    if (r.status !== 200) { $('status').textContent = 'Could not read /openapi.json: HTTP ' + r.status; return; }
    try { spec = JSON.parse(r.text); } catch (e) { $('status').textContent = '/openapi.json is not JSON'; return; }
    draw();
  }
  load();
}());
