package sim

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// The LIST lag model.
//
// GET and HEAD read the truth; the two listings read a view that lags it,
// per key (and per upload), with lags drawn from the store's lag stream:
//
//   - A key created at t (absent → present) is listed from t + lag on,
//     lag uniform in [ListLagMin, ListLagMax]. Overwriting a key does not
//     change its visibility.
//   - A key deleted at t that was already listed keeps being listed (with
//     its last metadata) until t + linger, linger uniform in
//     [ListLingerMin, ListLingerMax]. A key deleted before it ever became
//     visible is never listed.
//   - A key re-created while still lingering stays listed throughout.
//   - Multipart uploads follow the same rules: listed from creation + lag,
//     lingering after Complete or Abort.
//
// Pages are computed at the instant the request completes, so a paginated
// walk sees each page at a different time: a key that becomes visible
// behind the walk's position is missed, as with real S3. NextToken is the
// last key returned; the next page starts strictly after it.

// listed reports whether a listing at now shows the key.
func (e *entry) listed(now time.Duration) bool {
	if e.present {
		return now >= e.visibleAt
	}
	return now < e.lingerUntil
}

// ListObjects implements engine.ObjectStore.
func (c *storeClient) ListObjects(prefix, token string, done func(page engine.ListPage, err error)) {
	var page engine.ListPage
	c.s.submit(c.inc, OpList, prefix, 0, func() error {
		page = c.s.listPage(prefix, token)
		return nil
	}, func(err error) {
		if err != nil {
			page = engine.ListPage{}
		}
		done(page, err)
	})
}

// listPage returns the page of listed keys under prefix after token.
func (s *Store) listPage(prefix, token string) engine.ListPage {
	now := s.sched.now
	i := s.keyIndex(prefix)
	if token != "" {
		i = max(i, sort.Search(len(s.keys), func(j int) bool { return s.keys[j] > token }))
	}
	var page engine.ListPage
	for ; i < len(s.keys) && strings.HasPrefix(s.keys[i], prefix); i++ {
		e := s.entries[s.keys[i]]
		if !e.listed(now) {
			continue
		}
		if len(page.Objects) == s.cfg.PageSize {
			page.NextToken = page.Objects[len(page.Objects)-1].Key // another listed key follows
			break
		}
		page.Objects = append(page.Objects, e.info(s.keys[i]))
	}
	return page
}

// ListMultipartUploads implements engine.ObjectStore.
func (c *storeClient) ListMultipartUploads(prefix, keyMarker, uploadIDMarker string, done func(page engine.UploadsPage, err error)) {
	var page engine.UploadsPage
	c.s.submit(c.inc, OpListUploads, prefix, 0, func() error {
		page = c.s.uploadsPage(prefix, keyMarker, uploadIDMarker)
		return nil
	}, func(err error) {
		if err != nil {
			page = engine.UploadsPage{}
		}
		done(page, err)
	})
}

// uploadsPage returns the page of listed uploads under prefix after the
// marker pair. As in S3, a key marker without an upload-id marker starts
// after every upload of that key.
func (s *Store) uploadsPage(prefix, keyMarker, idMarker string) engine.UploadsPage {
	now := s.sched.now
	i := sort.Search(len(s.uploadOrder), func(j int) bool {
		u := s.uploadOrder[j]
		if u.key != keyMarker {
			return u.key > keyMarker && u.key >= prefix
		}
		return idMarker != "" && u.id > idMarker && u.key >= prefix
	})
	var page engine.UploadsPage
	for ; i < len(s.uploadOrder); i++ {
		u := s.uploadOrder[i]
		if !strings.HasPrefix(u.key, prefix) {
			break
		}
		if !u.listed(now) {
			continue
		}
		if len(page.Uploads) == s.cfg.PageSize {
			last := page.Uploads[len(page.Uploads)-1]
			page.Truncated, page.NextKeyMarker, page.NextUploadIDMarker = true, last.Key, last.UploadID
			break
		}
		page.Uploads = append(page.Uploads, u.info())
	}
	return page
}

// keyIndex returns the index of the first key >= k.
func (s *Store) keyIndex(k string) int {
	i, _ := slices.BinarySearch(s.keys, k)
	return i
}

func (s *Store) insertKey(key string, e *entry) {
	i, found := slices.BinarySearch(s.keys, key)
	if found {
		panic("sim: store key inserted twice: " + key)
	}
	s.keys = slices.Insert(s.keys, i, key)
	s.entries[key] = e
}

func (s *Store) removeKey(key string) {
	i, found := slices.BinarySearch(s.keys, key)
	if !found {
		panic("sim: store key removed but absent: " + key)
	}
	s.keys = slices.Delete(s.keys, i, i+1)
	delete(s.entries, key)
}

// maybePurge sweeps expired lingering keys and uploads once enough have
// accumulated; the threshold doubles with the survivors, so the sweep
// costs amortized O(1) per mutation.
func (s *Store) maybePurge() {
	if s.lingering < s.purgeAt {
		return
	}
	s.purge()
	s.purgeAt = max(purgeMin, 2*s.lingering)
}

// purge forgets every deleted key and finished upload no listing shows
// any more.
func (s *Store) purge() {
	now := s.sched.now
	keys := s.keys[:0]
	for _, k := range s.keys {
		if e := s.entries[k]; !e.present && !e.listed(now) {
			delete(s.entries, k)
			s.lingering--
			continue
		}
		keys = append(keys, k)
	}
	clear(s.keys[len(keys):])
	s.keys = keys
	order := s.uploadOrder[:0]
	for _, u := range s.uploadOrder {
		if !u.active && !u.listed(now) {
			delete(s.uploads, u.id)
			s.lingering--
			continue
		}
		order = append(order, u)
	}
	clear(s.uploadOrder[len(order):])
	s.uploadOrder = order
	if s.lingering < 0 {
		panic("sim: store lingering count went negative")
	}
}
