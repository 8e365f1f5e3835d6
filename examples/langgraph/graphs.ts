/**
 * The two LangGraph.js graphs of the demo, with a fake chat model (no network) whose every call is
 * appended to a call log, so the demo can show which LLM calls were paid for and which were not.
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import type { BaseMessage } from '@langchain/core/messages';
import { FakeListChatModel } from '@langchain/core/utils/testing';
import { Annotation, END, MessagesAnnotation, START, StateGraph, interrupt } from '@langchain/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

/** One line of the call log: a node asked the model (`call`) or got its answer (`answer`). */
export interface CallRecord {
  node: string;
  event: 'call' | 'answer';
  pid: number;
}

export function readCalls(file: string): CallRecord[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as CallRecord);
}

/** Scripted answers per node; `slowMs` makes a node's call take that long (the kill lands meanwhile). */
const ANSWERS: Record<string, string> = {
  plan: 'Plan: (1) market position, (2) latest filings, (3) write the brief.',
  market: 'Market: services revenue up 14%, hardware flat.',
  filings: '10-Q: buyback of $25B announced; risk factors unchanged.',
  write: 'Brief: AAPL services growth offsets flat hardware; a $25B buyback supports the stock.',
  compose: 'Draft post: "AAPL Q3 in one line: services up, buyback big."',
};

/**
 * Asks the fake model as node `node`: prints what happens and appends the call and the answer to `log`
 * (synchronously, so a kill cannot lose a line).
 */
async function ask(log: string, node: string, prompt: string, slowMs = 0): Promise<BaseMessage> {
  const model = new FakeListChatModel({ responses: [ANSWERS[node]], sleep: slowMs });
  appendFileSync(log, `${JSON.stringify({ node, event: 'call', pid: process.pid })}\n`);
  console.log(`${node.padEnd(8)} asks the model${slowMs > 1000 ? ` (a slow call: ${(slowMs / 1000).toFixed(0)} s)` : ''}`);
  const answer = await model.invoke(prompt);
  appendFileSync(log, `${JSON.stringify({ node, event: 'answer', pid: process.pid })}\n`);
  console.log(`${node.padEnd(8)} got: ${answer.text}`);
  return answer;
}

const ReportState = Annotation.Root({
  ...MessagesAnnotation.spec,
  ticker: Annotation<string>(),
  brief: Annotation<string>(),
});

/**
 * plan -> (market, filings in parallel) -> write. `filings` is slow: the demo kills the process while it
 * is in flight, after `market` has finished.
 */
export function reportGraph(checkpointer: BaseCheckpointSaver, log: string, filingsMs: number) {
  return new StateGraph(ReportState)
    .addNode('plan', async (s) => ({ messages: [await ask(log, 'plan', `plan research on ${s.ticker}`)] }))
    .addNode('market', async (s) => ({ messages: [await ask(log, 'market', `market position of ${s.ticker}`)] }))
    .addNode('filings', async (s) => ({ messages: [await ask(log, 'filings', `latest filings of ${s.ticker}`, filingsMs)] }))
    .addNode('write', async (s) => {
      const brief = await ask(log, 'write', `write a brief from ${s.messages.length} notes`);
      return { messages: [brief], brief: brief.text };
    })
    .addEdge(START, 'plan')
    .addEdge('plan', 'market')
    .addEdge('plan', 'filings')
    .addEdge(['market', 'filings'], 'write')
    .addEdge('write', END)
    .compile({ checkpointer });
}

const ApprovalState = Annotation.Root({
  topic: Annotation<string>(),
  draft: Annotation<string>(),
  decision: Annotation<{ approved: boolean; editor: string }>(),
  published: Annotation<boolean>(),
});

/** compose (writes the draft) -> review (a human answers through interrupt()) -> publish. */
export function approvalGraph(checkpointer: BaseCheckpointSaver, log: string) {
  return new StateGraph(ApprovalState)
    .addNode('compose', async (s) => ({ draft: (await ask(log, 'compose', `draft a post about ${s.topic}`)).text }))
    .addNode('review', (s) => {
      // The graph stops here and the process may exit; the answer arrives through Command({ resume }).
      const decision = interrupt<{ question: string; draft: string }, { approved: boolean; editor: string }>({ question: 'Publish this draft?', draft: s.draft });
      return { decision };
    })
    .addNode('publish', (s) => ({ published: s.decision.approved }))
    .addEdge(START, 'compose')
    .addEdge('compose', 'review')
    .addEdge('review', 'publish')
    .addEdge('publish', END)
    .compile({ checkpointer });
}
