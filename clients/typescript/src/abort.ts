// One "abort" listener per AbortSignal, however many calls share it.
//
// Every call that takes a signal must hear its abort. A listener of its
// own on the signal each would make an 11th call sharing one signal
// print MaxListenersExceededWarning, and raising the signal's limit
// (events.setMaxListeners) would change a signal the caller owns. So the
// first call to watch a signal adds the one listener, and every call
// adds and removes its callback in a set of that signal's.

const watchers = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls fn once when signal aborts (at once if it has); returns the
 * function that stops watching.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) {
    queueMicrotask(fn);
    return () => {};
  }
  let set = watchers.get(signal);
  if (!set) {
    const fns = new Set<() => void>();
    set = fns;
    watchers.set(signal, fns);
    signal.addEventListener(
      "abort",
      () => {
        watchers.delete(signal);
        for (const f of fns) f();
      },
      { once: true },
    );
  }
  const s = set;
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    s.delete(once);
    fn();
  };
  s.add(once);
  return () => {
    done = true;
    s.delete(once);
  };
}
