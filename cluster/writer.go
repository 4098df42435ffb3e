package cluster

// The writer goroutine runs only while a connection has answers that
// nobody else writes.
//
// Most answers are written by the goroutine that applied the batch which
// produced them (direct.go), so a writer kept for every connection would
// be idle on almost all of them, and its goroutine and stack a large part
// of what an idle connection costs. A connection's writer is started
// when an answer must be written
// asynchronously: a direct write the socket did not take whole, an
// answer produced outside any batch (a lease that ends, a grant it
// causes), every answer of a TLS connection, and the close of the
// connection. It writes until nothing is queued and returns.
//
// One writer at a time: writerState, under conn.outMu, says whether one
// runs and whether it was woken since it last looked, which it checks
// before it returns, so that no answer is queued between its last look
// and its end without a writer. A writer starts only once the connection
// is the one it writes to (after its TLS handshake: readLoop), never
// again once the connection is closed (done), and is counted in the
// node's wait group by the goroutine that starts it, while the count is
// above zero: a reader, the timer loop or another goroutine of the node,
// each counted itself; the authentication timeout, under the node mutex
// while the connection is not gone (its reader is counted until then);
// or shutdown, before it waits.

// writerState is a connection's writer goroutine's state, guarded by
// conn.outMu.
type writerState struct {
	ready   bool // c.nc is the connection to write to: a writer may start
	running bool // a writer goroutine runs, or is starting
	woken   bool // signalled since the writer last looked
	done    bool // c is closed, or will be by the writer running: none starts again
}

// wake records a signal, and reports whether a writer is to be started.
func (w *writerState) wake() bool {
	w.woken = true
	if w.running || !w.ready || w.done {
		return false
	}
	w.running = true
	return true
}

// signal wakes c's writer, starting one if none runs.
func (c *conn) signal() {
	c.outMu.Lock()
	start := c.wr.wake()
	c.outMu.Unlock()
	if start {
		c.startWriter()
	}
}

// writerReady says c.nc is the connection to write to: a signal that
// came before starts the writer now.
func (c *conn) writerReady() {
	c.outMu.Lock()
	c.wr.ready = true
	start := c.wr.woken && c.wr.wake()
	c.outMu.Unlock()
	if start {
		c.startWriter()
	}
}

func (c *conn) startWriter() {
	c.n.wg.Add(1)
	go c.writeLoop()
}

func (c *conn) writeLoop() {
	defer c.n.wg.Done()
	for c.writerWoken() {
		if !c.flush(false) {
			c.outMu.Lock()
			c.wr.running = false
			c.outMu.Unlock()
			return
		}
	}
}

// writerWoken reports whether c's writer was signalled since it last
// looked; if not, the writer is no longer running.
func (c *conn) writerWoken() bool {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if !c.wr.woken {
		c.wr.running = false
		return false
	}
	c.wr.woken = false
	return true
}
