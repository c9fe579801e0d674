#!/usr/bin/env node
// What grew between two V8 heap snapshots, by node type and constructor/name: count and self size.
//   node bench/heap-support.mjs before.heapsnapshot after.heapsnapshot [rows] [--per=N]
// --per=N divides by N (e.g. the number of connections opened between the two) to print bytes per
// connection. Written for idle-memory (BENCH_HEAP_SNAPSHOT=dir writes one snapshot per memory reading).
import { readFileSync } from 'node:fs';

const [beforePath, afterPath, rowsArg] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const per = Number(process.argv.find((a) => a.startsWith('--per='))?.slice(6) ?? 1);
if (!beforePath || !afterPath) {
  console.error('usage: node bench/heap-support.mjs before.heapsnapshot after.heapsnapshot [rows] [--per=N]');
  process.exit(2);
}

function summarise(path) {
  const snapshot = JSON.parse(readFileSync(path, 'utf8'));
  const { node_fields: fields, node_types: [types] } = snapshot.snapshot.meta;
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const groups = new Map();
  const { nodes, strings } = snapshot;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt]];
    // Strings and code are grouped by type alone: their "name" is their content.
    const name = type === 'object' || type === 'closure' || type === 'native' || type === 'hidden' || type === 'array' ? strings[nodes[i + nameAt]].slice(0, 60) : '';
    const key = `${type}\t${name}`;
    const group = groups.get(key) ?? { count: 0, size: 0 };
    group.count += 1;
    group.size += nodes[i + sizeAt];
    groups.set(key, group);
  }
  return groups;
}

const before = summarise(beforePath);
const after = summarise(afterPath);
const rows = [];
let total = 0;
for (const [key, group] of after) {
  const was = before.get(key) ?? { count: 0, size: 0 };
  const size = group.size - was.size;
  total += size;
  if (size === 0) continue;
  const [type, name] = key.split('\t');
  rows.push({ type, name, count: +((group.count - was.count) / per).toFixed(2), bytes: +(size / per).toFixed(1) });
}
rows.sort((a, b) => b.bytes - a.bytes);
console.table(rows.slice(0, Number(rowsArg ?? 40)));
console.log(`total self size growth: ${(total / per).toFixed(1)} B${per === 1 ? '' : ` per unit (÷${per})`}`);
