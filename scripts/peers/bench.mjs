// The peers `seckill lock-bench --primitive` is measured beside, run the
// same way: N clients (each its own connection, or with `--connections
// shared` one ioredis connection for all, auto-pipelined) take the
// primitive in a loop for the run's duration, on one key (`hot`) or one
// each (`spread`), and the same promise is checked on what they saw.
// Prints one JSON line.
//
//   node bench.mjs --port 6379 --lib redis-semaphore|rate-limiter-flexible
//     --primitive mutex|semaphore|ratelimit --mode hot|spread --clients 32
//     --duration 10 [--permits 4] [--rate 1000 --burst 100] [--lease-ms 5000]
//     [--connections own|shared]
//
// scripts/bench.sh installs the libraries from npm into a scratch folder
// and runs this there; nothing of theirs is kept in the repository.
import Redis from 'ioredis';
import { Mutex, Semaphore } from 'redis-semaphore';
import { RateLimiterRedis } from 'rate-limiter-flexible';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => {
    if (a.startsWith('--')) pairs.push([a.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const port = Number(args.port ?? 6379);
const primitive = args.primitive ?? 'mutex';
const mode = args.mode ?? 'hot';
const clients = Number(args.clients ?? 32);
const duration = Number(args.duration ?? 5) * 1000;
const permits = Number(args.permits ?? 4);
const rate = Number(args.rate ?? 1000);
const burst = Number(args.burst ?? 100);
const leaseMs = Number(args['lease-ms'] ?? 5000);
const connections = args.connections ?? 'own';
const lib = primitive === 'ratelimit' ? 'rate-limiter-flexible' : 'redis-semaphore';

function quantile(sorted, q) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.round((sorted.length - 1) * q))];
}

const admin = new Redis({ port, host: '127.0.0.1' });
await admin.config('RESETSTAT');
const runId = Math.random().toString(16).slice(2, 10);
const started = performance.now();
const stop = started + duration;
// Hot: one set of gauges for every client; spread: each its own.
const newGauges = () => ({ holders: 0, most: 0, releasedAt: 0 });
const hotGauges = newGauges();
const waits = [];
const handoffs = [];
let operations = 0;
let admitted = 0;
let firstAdmit = null;
let lastAdmit = null;

const shared = connections === 'shared'
  ? new Redis({ port, host: '127.0.0.1', enableAutoPipelining: true })
  : null;

async function client(i) {
  const redis = shared ?? new Redis({ port, host: '127.0.0.1' });
  const key = mode === 'hot' ? `peer-${runId}` : `peer-${runId}-${i}`;
  const g = mode === 'hot' ? hotGauges : newGauges();
  if (primitive === 'ratelimit') {
    // Points per window: `burst` cells per `burst / rate` seconds, the same
    // average rate and the same burst from idle.
    const limiter = new RateLimiterRedis({
      storeClient: redis, keyPrefix: key, points: burst, duration: burst / rate,
    });
    while (performance.now() < stop) {
      const asked = performance.now();
      try {
        await limiter.consume('k', 1);
        admitted += 1;
        const now = performance.now();
        firstAdmit ??= now;
        lastAdmit = now;
      } catch (refused) {
        if (refused instanceof Error) throw refused;
      }
      operations += 1;
      waits.push(performance.now() - asked);
    }
  } else {
    const options = { lockTimeout: leaseMs, acquireTimeout: 30000 };
    while (performance.now() < stop) {
      const lock = primitive === 'mutex'
        ? new Mutex(redis, key, options)
        : new Semaphore(redis, key, permits, options);
      const asked = performance.now();
      await lock.acquire();
      const got = performance.now();
      operations += 1;
      waits.push(got - asked);
      if (mode === 'hot' && g.releasedAt > 0) handoffs.push(got - g.releasedAt);
      g.holders += 1;
      g.most = Math.max(g.most, g.holders);
      g.holders -= 1;
      g.releasedAt = performance.now();
      await lock.release();
    }
  }
  if (!shared) redis.disconnect();
  return g.most;
}

const mosts = await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
const elapsed = (performance.now() - started) / 1000;
shared?.disconnect();
const stats = await admin.info('commandstats');
let usec = 0;
for (const line of stats.split('\n')) {
  const m = line.match(/^cmdstat_(\w+):calls=\d+,usec=(\d+),/);
  if (m && m[1] !== 'info' && m[1] !== 'config') usec += Number(m[2]);
}
admin.disconnect();
waits.sort((a, b) => a - b);
handoffs.sort((a, b) => a - b);
const most = Math.max(...mosts);
const limiters = mode === 'hot' ? 1 : clients;
// By this process's clock: a client's stamp trails the server's decision,
// so the check allows a millisecond more.
const span = firstAdmit === null ? 0 : (lastAdmit - firstAdmit + 1) / 1000;
const bound = limiters * (burst + rate * span);
const ok = primitive === 'ratelimit' ? admitted <= bound
  : most <= (primitive === 'mutex' ? 1 : permits);
console.log(JSON.stringify({
  peer: lib, primitive, mode, clients, connections, duration_s: elapsed, operations,
  operations_per_s: operations / elapsed,
  wait_p50_ms: quantile(waits, 0.5), wait_p99_ms: quantile(waits, 0.99),
  handoff_p50_ms: quantile(handoffs, 0.5), handoff_p99_ms: quantile(handoffs, 0.99),
  redis_us_per_operation: operations > 0 ? usec / operations : null,
  most_at_once: most,
  admitted: primitive === 'ratelimit' ? admitted : null,
  bound: primitive === 'ratelimit' ? bound : null,
  ok,
}));
