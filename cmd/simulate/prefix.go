package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sources/objects"
)

// prefixSource runs the real objects source (sources/objects) in a world:
// its Store, its ingest and its sleeps are the world's Blocking calls.
// It reads every object by its extension (format auto), in the world's
// chunks, skipping what it cannot read if the world has such objects.
func prefixSource(opt sim.PrefixOptions) sim.PrefixRunner {
	return prefixSourceOver(opt, func(s objects.Store) objects.Store { return s })
}

// prefixSourceOver is prefixSource with its store wrapped (tests).
func prefixSourceOver(opt sim.PrefixOptions, wrap func(objects.Store) objects.Store) sim.PrefixRunner {
	return &prefixRunner{opt: opt, wrap: wrap}
}

// prefixRunner is one run of the objects source.
type prefixRunner struct {
	opt  sim.PrefixOptions
	wrap func(objects.Store) objects.Store
	src  *objects.Source // nil until Run has built it
}

func (p *prefixRunner) Run(b sim.Blocking, offsets segment.Offsets) error {
	onError := objects.OnErrorStop
	if p.opt.Skip {
		onError = objects.OnErrorSkip
	}
	order := objects.OrderAny
	if p.opt.OrderKeys {
		order = objects.OrderKeys
	}
	src, err := objects.New(objects.Config{
		Name: p.opt.Name, Namespace: p.opt.Namespace, SinkRef: p.opt.Sink, Format: objects.FormatAuto,
		ChunkBytes: p.opt.ChunkBytes, OnError: onError, Poll: 500 * time.Millisecond,
		Order: order, Settle: p.opt.Settle, InFlight: max(1, p.opt.InFlight),
		Logger: slog.New(slog.DiscardHandler),
		Sleep: func(ctx context.Context, d time.Duration) error {
			b.Sleep(d)
			return ctx.Err()
		},
		Now: b.Now, Tasks: b, Once: p.opt.Once,
	}, p.wrap(simStore{b, p.opt.Prefix}))
	if err != nil {
		return err
	}
	p.src = src
	err = src.Run(context.Background(), func(_ context.Context, u engine.Unit) error { return b.Ingest(u) }, offsets)
	if se, ok := errors.AsType[*objects.OnceStoreError](err); ok {
		return fmt.Errorf("%w: %v", sim.ErrPrefixOnceStore, se)
	}
	return err
}

func (p *prefixRunner) Skipped() uint64 {
	if p.src == nil {
		return 0
	}
	return p.src.Stats().ObjectsSkipped
}

// simStore is objects.Store over the world's store.
type simStore struct {
	b      sim.Blocking
	prefix string
}

func (s simStore) List(_ context.Context, after string) (objects.Page, error) {
	listed, next, err := s.b.List(s.prefix, after)
	if err != nil {
		return objects.Page{}, err
	}
	page := objects.Page{Objects: make([]objects.Object, 0, len(listed)), Next: next}
	for _, o := range listed {
		page.Objects = append(page.Objects, objects.Object{Key: strings.TrimPrefix(o.Key, s.prefix), Size: o.Size})
	}
	return page, nil
}

func (s simStore) Open(_ context.Context, key string, off int64) (io.ReadCloser, error) {
	body, err := s.b.Get(s.prefix+key, off, -1)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(body)), nil
}

func (s simStore) ReaderAt(_ context.Context, key string, size int64) (objects.ReadAtCloser, error) {
	return readerAt{s.b, s.prefix + key, size}, nil
}

type readerAt struct {
	b    sim.Blocking
	key  string
	size int64
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-off)
	body, err := r.b.Get(r.key, off, n)
	if err != nil {
		return 0, err
	}
	c := copy(p, body)
	if int64(c) < int64(len(p)) {
		return c, io.EOF
	}
	return c, nil
}

func (readerAt) Close() error { return nil }
