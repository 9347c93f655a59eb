// Runs one SQL statement in an in-memory DuckDB and prints its rows as a
// JSON array of objects on stdout (DuckDB's own JSON forms: BIGINT and
// DOUBLE as numbers or strings, timestamps as text). Used by nodetest.go.
import { DuckDBInstance } from '@duckdb/node-api';

const sql = process.argv[2];
if (!sql) {
  console.error('usage: node query.mjs "SELECT ..."');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const reader = await conn.runAndReadAll(sql);
process.stdout.write(JSON.stringify(reader.getRowObjectsJson()));
