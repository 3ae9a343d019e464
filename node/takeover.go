package node

import (
	"context"
	"strconv"
	"time"

	"github.com/slotd/slotd/slots"
)

// A slot can come to this node without an import: when a failed node's
// slots are given to new owners, empty (slotctl nodes fail). If this node
// still holds an old copy of such a slot (handed off earlier and not yet
// dropped), serving it would bring back values the directory declared
// lost. So the node follows its map's ownership: a slot it gains with no
// import progress for it (every move to it leaves some until the slot is
// owned) and with data is cleared first, as a drop the request path waits
// for (requests get ErrDropping), and then served empty.

// takeoverTick is how often Run looks at the map for gained slots between
// requests (a request looks at once).
const takeoverTick = 100 * time.Millisecond

// checkGained processes a map newer than the last one looked at: slots it
// makes this node's are cleared when they came without an import. It is
// cheap when nothing changed (one atomic load). Only a WholeMap source
// has the whole map to compare.
func (n *Node) checkGained(version uint64) {
	if n.takeVer.Load() == version {
		return
	}
	n.takeMu.Lock()
	defer n.takeMu.Unlock()
	m := n.wholeMap()
	if m == nil || m.Empty() || n.takeVer.Load() == m.Version() {
		return
	}
	owned := m.SlotsOf(n.cfg.ID)
	if n.takeOwned != nil {
		var todo, gained []slots.Slot
		seeds := map[slots.Slot]SlotRates{}
		for s := range owned.All() {
			if n.takeOwned.Contains(s) {
				continue
			}
			gained = append(gained, s)
			n.impMu.Lock()
			imp := n.imports[s]
			if sd, ok := n.seeds[s]; ok {
				// The source's rates of this very move: the slot's
				// averages go on from them.
				if imp != nil && imp.MoveID == sd.moveID {
					seeds[s] = sd.rates
				}
				delete(n.seeds, s)
			}
			n.impMu.Unlock()
			if imp == nil && !n.Dropping(s) {
				todo = append(todo, s) // not by an import, not being cleared
			}
		}
		n.clearGained(todo)
		n.load.gain(gained, n.cfg.Clock.Now(), seeds)
	}
	n.takeOwned = &owned
	n.takeVer.Store(m.Version())
}

// clearGained clears those of the slots that hold data (one listing when
// the store can, else a size each).
func (n *Node) clearGained(todo []slots.Slot) {
	if len(todo) == 0 {
		return
	}
	ctx := context.Background()
	var withData *slots.Set
	if l, ok := n.store.(SlotLister); ok && len(todo) > 1 {
		if set, err := l.SlotsWithData(ctx); err == nil {
			withData = &set
		}
	}
	for _, s := range todo {
		var keys int64
		if withData != nil {
			if withData.Contains(s) {
				keys = 1
			}
		} else {
			var err error
			if keys, _, err = n.store.SlotSize(ctx, s); err != nil {
				n.lg.Warn("cannot size a slot gained without an import; serving it as it is", "slot", s.Int(), "err", err)
				continue
			}
		}
		if keys > 0 {
			n.clearOld(s)
		}
	}
}

// clearOld starts deleting the old copy of slot s, which this node owns
// again without an import; requests wait for it (ErrDropping).
func (n *Node) clearOld(s slots.Slot) {
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	n.dropMu.Lock()
	defer n.dropMu.Unlock()
	if _, running := n.dropping[s]; running {
		return
	}
	rate := n.cfg.DropBytesPerSecond
	if err := n.state.set(slotKey(dropPrefix, s), strconv.FormatInt(rate, 10), true); err != nil {
		n.lg.Error("cannot record the clearing of a slot gained without an import", "slot", s.Int(), "err", err)
		return
	}
	n.dropping[s] = rate
	n.dropFlag[s.Int()].Store(true)
	select {
	case n.dropWake <- struct{}{}:
	default:
	}
	n.lg.Warn("slot gained without an import holds an old copy; clearing it before serving the slot empty", "slot", s.Int())
}

// lookAtMap runs checkGained on the current map. Call it before removing
// the import progress of a slot this node owns (and never under a slot's
// lock): a gain it has not looked at yet would otherwise be taken for one
// without an import, and the imported data cleared.
func (n *Node) lookAtMap() {
	if m := n.wholeMap(); m != nil {
		n.checkGained(m.Version())
	}
}

// runTakeover looks at the map every takeoverTick until ctx is done, so
// that the map a gain is compared with is recent even when no request
// comes.
func (n *Node) runTakeover(ctx context.Context) {
	if _, ok := n.cfg.Map.(WholeMap); !ok {
		return
	}
	t := time.NewTicker(takeoverTick)
	defer t.Stop()
	for {
		if m := n.wholeMap(); m != nil {
			n.checkGained(m.Version())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
