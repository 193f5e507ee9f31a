// Runs graphql-http's server audits against the casefile endpoint given as the first argument
// and prints one JSON line per audit: {"status": "ok"|"warn"|"error", "name": ..., "reason": ...}.
import { serverAudits } from 'graphql-http';

const url = process.argv[2];
const audits = serverAudits({ url, fetchFn: fetch });
for (const audit of audits) {
  const result = await audit.fn();
  console.log(JSON.stringify({ status: result.status, name: audit.name, reason: result.reason ?? null }));
}
