-- bench/server_wrk.lua: wrk's script for bench/server_bench.sh. Each request is an OpenAI embeddings
-- request of INPUTS texts (environment), taken in turn from the sentences of SENTENCES (a file, one
-- per line), so that requests differ as real traffic does; MODEL names the model. done() prints one
-- line: requests, seconds, p50 and p99 latency (ms), and the statuses seen.
local sentences = {}
local bodies = {}
local threads = {}

local function json_string(s)
  return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\t', '\\t') .. '"'
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local n = tonumber(os.getenv("INPUTS") or "1")
  for line in io.lines(os.getenv("SENTENCES")) do
    if #line > 0 then table.insert(sentences, line) end
  end
  local model = os.getenv("MODEL") or "all-MiniLM-L6-v2"
  local k = 1
  for b = 1, 97 do
    local parts = {}
    for i = 1, n do
      parts[i] = json_string(sentences[k])
      k = k % #sentences + 1
    end
    bodies[b] = '{"model": "' .. model .. '", "input": [' .. table.concat(parts, ",") .. ']}'
  end
  nextb = 1
  counts = {}
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local body = bodies[nextb]
  nextb = nextb % #bodies + 1
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
  local st = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("counts")) do st[k] = (st[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(st) do table.insert(parts, k .. ":" .. v) end
  io.write(string.format("RESULT requests=%d seconds=%.3f p50_ms=%.3f p99_ms=%.3f errors=%d statuses=%s\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, ",")))
end
