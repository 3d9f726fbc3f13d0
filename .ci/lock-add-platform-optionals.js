#!/usr/bin/env node
/**
 * Repairs package-lock.json when `npm ci` fails with
 *   "Missing: @swc/core-darwin-arm64@ from lock file" (and similar)
 * because the lock was written against a registry mirror that serves only this machine's
 * platform binaries: npm then silently leaves the other platforms' optional packages out of
 * the lock, and `npm ci` (anywhere) refuses the lock as out of sync.
 *
 * Adds, for every optionalDependency missing from the lock, an entry with the exact version
 * its parent pins plus the os/cpu read from the package name. Pure additions; `npm install`
 * keeps them. Usage: node .ci/lock-add-platform-optionals.js [package-lock.json]
 */
const fs = require('node:fs');

const file = process.argv[2] ?? 'package-lock.json';
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const packages = lock.packages;
const OSES = ['darwin', 'win32', 'linux', 'freebsd', 'android', 'openharmony', 'sunos', 'aix'];
const CPUS = ['arm64', 'x64', 'ia32', 'arm', 'ppc64', 's390x', 'riscv64', 'loong64'];
const added = [];

for (const [path, meta] of Object.entries(packages)) {
  for (const [dep, version] of Object.entries(meta.optionalDependencies ?? {})) {
    const nested = path ? `${path}/node_modules/${dep}` : `node_modules/${dep}`;
    if (packages[nested] || packages[`node_modules/${dep}`]) continue;
    const leaf = dep.split('/').pop();
    const entry = { version };
    if (meta.dev) entry.dev = true;
    entry.optional = true;
    const os = OSES.find((o) => leaf.includes(`-${o}-`) || leaf.endsWith(`-${o}`));
    if (os) entry.os = [os];
    const cpu = CPUS.find((c) => leaf.includes(`-${c}`));
    if (cpu) entry.cpu = [cpu];
    packages[`node_modules/${dep}`] = entry;
    added.push(`${dep}@${version}`);
  }
}

lock.packages = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b, 'en'))),
);
fs.writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
console.log(added.length ? `added ${added.length} lock entries:\n  ${added.join('\n  ')}` : 'nothing missing');
