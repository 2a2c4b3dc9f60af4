// The fake AWS endpoint's IAM evaluator (cmd/fake-aws --iam-enforce): it
// reads one authorization question a line on stdin and writes one answer a
// line on stdout. It is its own process because the evaluator,
// @cloud-copilot/iam-simulate, is AGPL-3.0: Joiner never links it.
//
// Question: {"id", "principal", "action", "resource", "account",
//            "context": {key: string | [string]}, "policies": [{name, policy}],
//            "unvalidated": bool}
// unvalidated skips the evaluator's input checks, for the one resource
// they reject wrongly: AWS's public SSM parameters, whose ARNs have no
// account (arn:aws:ssm:<region>::parameter/aws/service/...).
// Answer:   {"id", "result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied"
//            | "NotApplicable", "error": string (a malformed question)}
// NotApplicable: by AWS's authorization reference (the evaluator's data) the
// action is not authorized on that resource type at all (ec2:CreateFleet
// on a network interface, say), so AWS makes no such check.
'use strict';
const readline = require('readline');
const { runSimulation, runUnsafeSimulation } = require('@cloud-copilot/iam-simulate');

const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on('line', async (line) => {
  let q;
  try {
    q = JSON.parse(line);
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: -1, error: 'bad JSON: ' + e.message }) + '\n');
    return;
  }
  try {
    const simulation = {
      request: {
        principal: q.principal,
        action: q.action,
        resource: { resource: q.resource, accountId: q.account },
        contextVariables: q.context || {},
      },
      identityPolicies: q.policies || [],
      serviceControlPolicies: [],
      resourceControlPolicies: [],
    };
    if (q.unvalidated) {
      process.stdout.write(JSON.stringify({ id: q.id, result: runUnsafeSimulation(simulation, {}) }) + '\n');
      return;
    }
    const r = await runSimulation(simulation, {});
    const out = { id: q.id, result: r.overallResult };
    if (r.errors) {
      out.error = JSON.stringify(r.errors);
      if (out.error.includes('no.resource.types')) {
        out.result = 'NotApplicable';
      }
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: q.id, error: String(e && e.message || e) }) + '\n');
  }
});
