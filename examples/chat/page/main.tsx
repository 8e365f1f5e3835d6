import { useChat } from '@ai-sdk/react';
import type { UIMessage } from 'ai';
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { createRoot } from 'react-dom/client';
import { WaypointChatTransport } from 'waypoint-durable/ai/client';

/*
 * The chat page of `npm run demo:chat`: the AI SDK's own useChat, with WaypointChatTransport so a cut
 * connection continues where it stopped, and `resume: true` so a reloaded page picks the running answer
 * up from its start. The chat id lives in the URL (?chat=...); the history comes from the server.
 */

function chatIdFromUrl(): string {
  const url = new URL(location.href);
  let id = url.searchParams.get('chat');
  if (!id) {
    id = crypto.randomUUID().replace(/-/g, '').slice(0, 16);
    url.searchParams.set('chat', id);
    history.replaceState(null, '', url);
  }
  return id;
}

interface History {
  messages: UIMessage[];
  activeRunId: string | null;
}

function App() {
  const chatId = useMemo(chatIdFromUrl, []);
  const [loaded, setLoaded] = useState<History | null>(null);
  useEffect(() => {
    void fetch(`/api/chat/${chatId}/history`)
      .then((r) => r.json() as Promise<History>)
      .then(setLoaded);
  }, [chatId]);
  if (!loaded) return <p>Loading…</p>;
  return <Chat chatId={chatId} initial={loaded.messages} />;
}

function Chat({ chatId, initial }: { chatId: string; initial: UIMessage[] }) {
  const transport = useMemo(() => new WaypointChatTransport({ api: '/api/chat' }), []);
  const { messages, sendMessage, status, error } = useChat({ id: chatId, messages: initial, resume: true, transport });
  const [text, setText] = useState('');
  const busy = status === 'submitted' || status === 'streaming';
  const running = [...messages].reverse().find((m) => m.role === 'assistant');

  const send = (event: FormEvent) => {
    event.preventDefault();
    if (!text.trim() || busy) return;
    void sendMessage({ text });
    setText('');
  };
  // The stop button cancels the run on the server (the model call in flight is aborted); the stream
  // then ends by itself. Closing the page would not stop anything.
  const stop = () => {
    if (running) void fetch(`/api/waypoint/runs/${encodeURIComponent(running.id)}/cancel`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  };

  return (
    <>
      <h1>Shoe shop support</h1>
      <p className="sub">A durable chat: kill the server mid-answer, reload, cut the network; the answer completes once.</p>
      {messages.map((m) => (
        <Message key={m.id} message={m} />
      ))}
      {error && <p className="err">{error.message}</p>}
      <form onSubmit={send}>
        <input aria-label="Message" value={text} placeholder="Ask about order A-1042…" onChange={(e) => setText(e.target.value)} />
        {busy ? (
          <button type="button" className="stop" onClick={stop}>
            Stop
          </button>
        ) : (
          <button type="submit">Send</button>
        )}
      </form>
    </>
  );
}

function Message({ message }: { message: UIMessage }) {
  // Each text part is a paragraph: the streamed answer, then what later steps said (the refund).
  const text = message.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n\n');
  const tools = message.parts.filter((p) => p.type.startsWith('tool-'));
  const status = message.parts.find((p) => p.type === 'data-waypoint-status') as { data?: { status: string; signal?: string } } | undefined;
  return (
    <div className={`msg ${message.role}`} data-role={message.role} data-id={message.id}>
      {tools.map((p, i) => (
        <div className="tool" key={i}>
          tool {p.type.slice(5)}: {'state' in p && p.state === 'output-available' ? 'done' : 'state' in p ? String(p.state) : ''}
        </div>
      ))}
      <span className="text">{text}</span>
      {status?.data?.status === 'waiting' && <div className="status">Waiting for a manager to approve (an approval link was emailed).</div>}
      {status?.data?.status === 'cancelled' && <div className="status">Stopped.</div>}
    </div>
  );
}

createRoot(document.getElementById('app')!).render(<App />);
