package cluster

import "testing"

// A batch grown to a full one still fits the pool's bound, so the next
// batch of a pipelining client reuses its array instead of growing its
// own (append's growth went from 159 items to 320).
func TestFullBatchGoesBackToThePool(t *testing.T) {
	bb := batches.New().(*batchBuf)
	batch := bb.items[:0]
	for range maxBatch {
		batch = appendParsed(batch, []byte("A k 30 0\n"))
	}
	if len(batch) != maxBatch || cap(batch) > maxBatch {
		t.Fatalf("a full batch: %d items in an array of %d, want %d in at most %d", len(batch), cap(batch), maxBatch, maxBatch)
	}
	if batch[maxBatch-1].err != nil || batch[maxBatch-1].req.Key != "k" {
		t.Fatalf("last item %+v, want the acquire of k", batch[maxBatch-1])
	}
}
