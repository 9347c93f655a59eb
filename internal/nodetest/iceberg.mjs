// Reads an Iceberg table the way a reader that is not iceberg-go does:
// the metadata file (JSON), the current snapshot's manifest list and its
// manifests (Avro, decoded by avsc), then the live data files they list
// (DuckDB's read_parquet). Prints one JSON object on stdout:
//
//   {"snapshot": id, "snapshots": [{"id", "parent", "summary"}],
//    "files": [{"path", "records", "partition"}], "columns": [names],
//    "rows": [[values in column order], ...]}
//
// usage: node iceberg.mjs METADATA_JSON COLUMNS [FROM_PREFIX TO_PREFIX]
//   COLUMNS      the select list, e.g. "id" or "*"; "#1" is the table's
//                first column (its current schema's), whatever its name
//   FROM, TO     rewrite file locations starting with FROM to TO (a
//                bucket downloaded to a folder: s3://b/lake → /tmp/x)
// Used by nodetest.go.
import fs from 'node:fs';
import avro from 'avsc';
import { DuckDBInstance } from '@duckdb/node-api';

const [metadataPath, columns, fromPrefix, toPrefix] = process.argv.slice(2);
if (!metadataPath || !columns) {
  console.error('usage: node iceberg.mjs METADATA_JSON COLUMNS [FROM TO]');
  process.exit(2);
}

// local turns a file location of the table into a path on this machine.
function local(uri) {
  let p = uri;
  if (fromPrefix && p.startsWith(fromPrefix)) p = toPrefix + p.slice(fromPrefix.length);
  if (p.startsWith('file://')) p = p.slice('file://'.length);
  if (p.includes('://')) throw new Error(`location ${uri} is not on this machine (give FROM and TO)`);
  return p;
}

// longType reads Avro longs as BigInt: snapshot ids use all 64 bits,
// beyond what a JavaScript number holds exactly.
const longType = avro.types.LongType.__with({
  fromBuffer: (buf) => buf.readBigInt64LE(),
  toBuffer: (n) => { const buf = Buffer.alloc(8); buf.writeBigInt64LE(BigInt(n)); return buf; },
  fromJSON: BigInt,
  toJSON: Number,
  isValid: (n) => typeof n === 'bigint',
  compare: (a, b) => (a === b ? 0 : a < b ? -1 : 1),
});

// records decodes every record of an Avro object container file.
function records(path) {
  return new Promise((resolve, reject) => {
    const out = [];
    const parseHook = (schema) => avro.Type.forSchema(schema, { registry: { long: longType } });
    avro.createFileDecoder(local(path), { parseHook })
      .on('data', (r) => out.push(r))
      .on('error', reject)
      .on('end', () => resolve(out));
  });
}

// Snapshot ids are 64-bit: parse them as text, never as doubles.
const text = fs.readFileSync(local(metadataPath), 'utf8')
  .replace(/"(current-snapshot-id|snapshot-id|parent-snapshot-id)"\s*:\s*(-?\d+)/g, '"$1":"$2"');
const meta = JSON.parse(text);
const current = meta['current-snapshot-id'];
const snapshots = (meta.snapshots || []).map((s) => ({
  id: s['snapshot-id'], parent: s['parent-snapshot-id'] === undefined ? null : s['parent-snapshot-id'],
  summary: s.summary || {},
}));
const files = [];
if (current !== undefined && current !== null && current !== '-1') {
  const snap = meta.snapshots.find((s) => s['snapshot-id'] === current);
  if (!snap) throw new Error(`current snapshot ${current} is not among the table's snapshots`);
  for (const m of await records(snap['manifest-list'])) {
    if (m.content !== 0) throw new Error(`manifest ${m.manifest_path} holds deletes (content ${m.content}): not a table this reader reads`);
    for (const e of await records(m.manifest_path)) {
      if (e.status === 2) continue; // deleted in this snapshot
      const df = e.data_file;
      if (df.content !== undefined && df.content !== 0) throw new Error(`delete file ${df.file_path} in a data manifest`);
      files.push({ path: df.file_path, records: String(df.record_count), partition: df.partition });
    }
  }
}
let select = columns;
if (columns === '#1') {
  const schema = (meta.schemas || []).find((x) => x['schema-id'] === meta['current-schema-id']) || meta.schema;
  select = `"${schema.fields[0].name.replaceAll('"', '""')}"`;
}
let rows = [];
let names = [];
if (files.length > 0) {
  const list = files.map((f) => `'${local(f.path).replaceAll("'", "''")}'`).join(', ');
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const reader = await conn.runAndReadAll(`SELECT ${select} FROM read_parquet([${list}], union_by_name=true, hive_partitioning=false)`);
  rows = reader.getRowsJson();
  names = reader.columnNames();
}
process.stdout.write(JSON.stringify({ snapshot: current === undefined ? null : current, snapshots, files, columns: names, rows },
  (_k, v) => (typeof v === 'bigint' ? v.toString() : v)));
