// Runs one execution of a state machine definition locally: asl-validator first, then
// aws-local-stepfunctions, with every Task state overridden by a call back into the Python process
// that started this one (evidence/local_sfn.py), which runs the real Lambda handler.
//
// Protocol: JSON lines. stdin: the job first ({definition, input, context, retryIntervalMs?}),
// then one reply per invocation ({id, result} or {id, error: {errorType, errorMessage}}).
// stdout: {type: "invalid", errors} | {type: "invoke", id, state, resource, event} |
// {type: "item", state, index, output} (a Map iteration finished) | {type: "done", ...} (last).
// Nothing else is written to stdout: console output goes to stderr.

import { createInterface } from "node:readline";

for (const level of ["log", "info", "warn", "debug"]) {
  console[level] = (...args) => process.stderr.write(args.map(String).join(" ") + "\n");
}

// aws-local-stepfunctions 3 declares Node >= 22 for this one call (Promise.withResolvers, Node 22);
// the README's prerequisite is Node 20, so it is provided here, as specified (TC39 stage 4).
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

const { StateMachine, ExecutionError } = await import("aws-local-stepfunctions");
const { default: aslValidator } = await import("asl-validator");

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
// A large last line is still in flight when process.exit would cut it: exit once it is written.
const finish = (message, code) => process.stdout.write(JSON.stringify(message) + "\n", () => process.exit(code));
const bytes = (value) => (value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value), "utf8"));

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const pending = new Map();
let job = null;
let resolveJob;
const jobReady = new Promise((resolve) => {
  resolveJob = resolve;
});
lines.on("line", (line) => {
  if (!line.trim()) return;
  const message = JSON.parse(line);
  if (job === null) {
    job = message;
    resolveJob(message);
    return;
  }
  const waiter = pending.get(message.id);
  if (waiter) {
    pending.delete(message.id);
    waiter(message);
  }
});
lines.on("close", () => {
  // The Python side went away: fail what is in flight rather than hang.
  for (const [id, waiter] of pending) {
    pending.delete(id);
    waiter({ id, error: { errorType: "Bridge.Closed", errorMessage: "the Python bridge closed its pipe" } });
  }
});

const { definition, input, context, retryIntervalMs } = await jobReady;

// asl-validator annotates the object it checks (QueryLanguage on every state): check a copy.
const checked = aslValidator(structuredClone(definition), { checkPaths: true, checkArn: true });
if (!checked.isValid) {
  const text = (e) => (e.Message ? `${e["Error code"]}: ${e.Message}` : JSON.stringify(e));
  finish({ type: "invalid", errors: checked.errors.map(text) }, 1);
} else {
  await execute();
}

async function execute() {

  // Every Task state, at any depth (Map item processors, Parallel branches): state names are unique.
  const tasks = {};
  const retried = {};
  (function walk(states) {
    for (const [name, state] of Object.entries(states ?? {})) {
      // aws-local-stepfunctions 3.0.0 stores a result under a key named "$" for `ResultPath: "$"`;
      // the spec says the result replaces the whole input, which is also what no ResultPath means.
      if (state.ResultPath === "$") delete state.ResultPath;
      for (const catcher of state.Catch ?? []) if (catcher.ResultPath === "$") delete catcher.ResultPath;
      if (state.Type === "Task") tasks[name] = state.Resource;
      if (state.Retry) retried[name] = state.Retry;
      const processor = state.ItemProcessor ?? state.Iterator;
      if (processor) walk(processor.States);
      for (const branch of state.Branches ?? []) walk(branch.States);
    }
  })(definition.States);

  let largest = { bytes: bytes(input), where: "execution input" };
  const measure = (value, where) => {
    const size = bytes(value);
    if (size > largest.bytes) largest = { bytes: size, where };
  };

  let nextId = 0;
  const handlers = {};
  for (const [state, resource] of Object.entries(tasks)) {
    handlers[state] = async (event) => {
      const id = ++nextId;
      const reply = new Promise((resolve) => pending.set(id, resolve));
      measure(event, `${state} task input`);
      send({ type: "invoke", id, state, resource, event });
      const answer = await reply;
      if (answer.error) {
        // As Lambda reports a function error to Step Functions: Error = errorType, Cause = the payload.
        const error = new Error(JSON.stringify(answer.error));
        error.name = answer.error.errorType;
        throw error;
      }
      measure(answer.result, `${state} task result`);
      return answer.result;
    };
  }

  const overrides = { taskResourceLocalHandlers: handlers };
  if (retryIntervalMs !== undefined && retryIntervalMs !== null) {
    overrides.retryIntervalOverrides = Object.fromEntries(Object.keys(retried).map((s) => [s, retryIntervalMs]));
  }

  const machine = new StateMachine(definition, { validationOptions: { checkPaths: true, checkArn: true } });
  const execution = machine.run(input, { overrides, context });

  const events = { retried: [], caught: [], failed: [] };
  const drain = (async () => {
    for await (const event of execution.eventLogs) {
      const where = event.index === undefined ? event.state?.name : `${event.state?.name}[${event.index}]`;
      switch (event.type) {
        case "StateEntered":
          measure(event.state.input, `${where} input`);
          break;
        case "StateExited":
          measure(event.state.output, `${where} output`);
          break;
        case "StateFailed":
          events.failed.push({ state: event.state.name, index: event.index ?? null, error: event.Error });
          break;
        case "StateRetried":
          events.retried.push({
            state: event.state.name,
            index: event.index ?? null,
            errors: event.retry.retrier.ErrorEquals,
            attempt: event.retry.attempt,
          });
          break;
        case "StateCaught":
          events.caught.push({ state: event.state.name, index: event.index ?? null, errors: event.catch.catcher.ErrorEquals });
          break;
        case "MapIterationSucceeded":
          send({ type: "item", state: event.parentState.name, index: event.index, output: event.output ?? null });
          break;
        default:
          break;
      }
    }
  })();

  let done;
  try {
    const output = await execution.result;
    await drain;
    measure(output, "execution output");
    done = { type: "done", status: "SUCCEEDED", output };
  } catch (caught) {
    await drain.catch(() => {});
    const cause = caught instanceof ExecutionError ? caught.cause : caught;
    done = { type: "done", status: "FAILED", error: cause?.name ?? "Error", cause: String(cause?.message ?? cause) };
  }
  finish({ ...done, largest, events }, 0);
}
