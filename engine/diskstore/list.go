package diskstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// ListObjects implements engine.ObjectStore. Keys come in ascending byte
// order of the whole key, which a directory walk does not give by itself
// ("a-x" < "a/y", yet the file a-x sits beside the directory a): the
// walk orders each directory's entries by the keys they stand for (an
// object file by its key, a directory by its prefix with the trailing
// "/"), which is the key order, and goes depth first, so it can stop
// after a page. Subtrees wholly outside the prefix or at or before token
// are not read.
//
// A listing shows the live directory tree without taking locks: it may
// show a write still in flight. Leftover temp files it meets are removed
// (doc.go).
func (s *Store) ListObjects(prefix, token string, done func(page engine.ListPage, err error)) {
	cut := strings.LastIndexByte(prefix, '/') + 1
	dirKey := prefix[:cut] // "" or ending in "/"
	start := s.objects
	if dirKey != "" {
		for e := range strings.SplitSeq(dirKey[:len(dirKey)-1], "/") {
			if checkElem(e) != nil || strings.IndexByte(e, 0) >= 0 {
				// No key has this prefix.
				s.later(func() { done(engine.ListPage{}, nil) })
				return
			}
			start += "/" + e + dirSuffix
		}
	}
	w := &walk{s: s, prefix: prefix, token: token, want: s.pageSize + 1,
		stack: []item{{key: dirKey, path: start, dir: true}}}
	w.run(func(err error) {
		if err != nil {
			done(engine.ListPage{}, fmt.Errorf("diskstore: list %q after %q: %w", prefix, token, err))
			return
		}
		s.pageOf(w.found, done)
	})
}

// item is an entry of the walk: an object (key is its key) or a
// directory (key is the prefix its objects share, ending in "/").
type item struct {
	key, path string
	dir       bool
}

type walk struct {
	s             *Store
	prefix, token string
	want          int
	// stack holds the entries still to visit; its top is the next in key
	// order.
	stack []item
	found []item
}

// run pops entries in key order until want objects are found or the tree
// is exhausted.
func (w *walk) run(done func(error)) {
	for len(w.stack) > 0 && len(w.found) < w.want {
		it := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		if !it.dir {
			w.found = append(w.found, it)
			continue
		}
		w.s.disk.ReadDir(it.path, func(names []string, err error) {
			switch {
			case errors.Is(err, engine.ErrNotFound):
			case err != nil:
				done(diskErr("readdir", it.path, err))
				return
			default:
				w.expand(it, names)
			}
			w.run(done)
		})
		return
	}
	done(nil)
}

// expand pushes dir's entries that may hold keys of the page.
func (w *walk) expand(dir item, names []string) {
	var kids []item
	for _, name := range names {
		var kid item
		switch {
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, tempSuffix):
			w.s.removeLeftover(dir.path + "/" + name)
			continue
		case len(name) > len(fileSuffix) && strings.HasSuffix(name, fileSuffix):
			kid = item{key: dir.key + strings.TrimSuffix(name, fileSuffix)}
		case len(name) > len(dirSuffix) && strings.HasSuffix(name, dirSuffix):
			kid = item{key: dir.key + strings.TrimSuffix(name, dirSuffix) + "/", dir: true}
		default:
			continue // not the store's
		}
		kid.path = dir.path + "/" + name
		if w.wanted(kid) {
			kids = append(kids, kid)
		}
	}
	slices.SortFunc(kids, func(a, b item) int { return strings.Compare(a.key, b.key) })
	for i := len(kids) - 1; i >= 0; i-- {
		w.stack = append(w.stack, kids[i])
	}
}

// wanted reports whether it holds (or is) a key under the prefix and after
// the token. Every key in a directory starts with its prefix P. The walk
// starts at the directory of the prefix up to its last "/", so below it
// P never ends before the prefix does (the rest of the prefix has no
// "/"): P holds keys under the prefix iff it starts with it. When P does
// not start the token and P < token, all its keys sort before the token.
func (w *walk) wanted(it item) bool {
	if !it.dir {
		return strings.HasPrefix(it.key, w.prefix) && it.key > w.token && checkKey(it.key) == nil
	}
	return strings.HasPrefix(it.key, w.prefix) && !(it.key < w.token && !strings.HasPrefix(w.token, it.key))
}

// pageOf reads the headers of the first pageSize of found, in order. A
// key deleted since the walk saw it is left out; a damaged header fails
// the listing (it is never taken for a missing object).
func (s *Store) pageOf(found []item, done func(page engine.ListPage, err error)) {
	n := min(len(found), s.pageSize)
	infos := make([]engine.ObjectInfo, n)
	present := make([]bool, n)
	errs := make([]error, n)
	each(n, readsInFlight, func(i int, next func()) {
		s.readObject(found[i].path, found[i].key, nil, func(h header, _ []byte, err error) {
			switch {
			case errors.Is(err, engine.ErrNotFound):
			case err != nil:
				errs[i] = err
			default:
				infos[i], present[i] = info(found[i].key, h), true
			}
			next()
		})
	}, func() {
		var page engine.ListPage
		for i := range n {
			if errs[i] != nil {
				done(engine.ListPage{}, fmt.Errorf("diskstore: list: %w", errs[i]))
				return
			}
			if present[i] {
				page.Objects = append(page.Objects, infos[i])
			}
		}
		if len(found) > n {
			page.NextToken = found[n-1].key
		}
		done(page, nil)
	})
}

// removeLeftover removes a temp file found by a listing unless a write of
// this store is still using it: then it is a leftover of a write that
// failed to clean up or of a process that died. Nothing waits for it.
func (s *Store) removeLeftover(path string) {
	if _, inFlight := s.temps[path]; inFlight {
		return
	}
	s.disk.Remove(path, func(error) {})
}
