package httpsrc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// bodyMessages reads the Arrow IPC messages of a request body, for
// arrow-go's stream reader (ipc.NewReader does not bound what a message
// may claim). Framing, as the IPC stream format has it:
//
//	u32 0xFFFFFFFF | i32 metadata_len | metadata (flatbuffer) | body
//	…
//	u32 0xFFFFFFFF | i32 0                        end of stream (optional)
//
// Every length is checked against what is left of the body limit before
// anything is allocated for it, and every metadata is verified
// (verifyMeta) before arrow-go reads it. Buffers come from mem and grow
// as bytes arrive, so a length the body does not back costs at most
// about what was sent. The first error is kept in err: arrow-go wraps or
// rewords what it is given, and decodeArrowIPC reports this one.
//
// Errors: a *badStream for a malformed stream; otherwise the body's own
// read error (ErrTooLarge among them), or ErrTooLarge for a length
// claiming more than the body may hold.
type bodyMessages struct {
	body  *limitedBody
	lim   Limits
	mem   memory.Allocator
	last  *ipc.Message // released when the next message is read
	count int          // messages read
	eos   bool         // the end-of-stream marker was read
	err   error
}

const ipcContinuation = 0xFFFFFFFF

func (m *bodyMessages) Message() (*ipc.Message, error) {
	m.Release()
	if m.err != nil {
		return nil, m.err
	}
	msg, err := m.read()
	if err != nil && err != io.EOF {
		m.err = err
	}
	return msg, err
}

func (m *bodyMessages) read() (msg *ipc.Message, err error) {
	var prefix [8]byte
	n, err := io.ReadFull(m.body, prefix[:4])
	switch {
	case n == 0 && err == io.EOF:
		return nil, io.EOF // a stream may end without its marker
	case err != nil:
		return nil, m.readError("message prefix", err)
	case binary.LittleEndian.Uint32(prefix[:4]) != ipcContinuation:
		return nil, malformedf("message %d does not start with the continuation marker 0xFFFFFFFF (streams written before Arrow 0.15 are not accepted)", m.count+1)
	}
	if _, err := io.ReadFull(m.body, prefix[4:]); err != nil {
		return nil, m.readError("metadata length", err)
	}
	metaLen := int64(int32(binary.LittleEndian.Uint32(prefix[4:])))
	switch {
	case metaLen == 0:
		m.eos = true
		return nil, io.EOF
	case metaLen < 0:
		return nil, malformedf("message %d: metadata length %d", m.count+1, metaLen)
	case metaLen > m.body.remaining():
		return nil, tooLargef("Arrow message %d claims %d bytes of metadata; %d are left of the %d-byte body limit",
			m.count+1, metaLen, m.body.remaining(), m.body.max)
	}
	meta, err := readBuffer(m.body, int(metaLen), m.mem)
	if err != nil {
		return nil, m.readError("metadata", err)
	}
	defer meta.Release()
	if err := verifyMeta(meta.Bytes(), m.lim); err != nil {
		var refused *badStream
		if errors.As(err, &refused) {
			return nil, &badStream{msg: fmt.Sprintf("message %d: %s", m.count+1, refused.msg)}
		}
		return nil, malformedf("message %d: %v", m.count+1, err)
	}
	return m.withBody(meta)
}

// withBody reads the body meta announces and returns the message.
func (m *bodyMessages) withBody(meta *memory.Buffer) (*ipc.Message, error) {
	probe := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	bodyLen := probe.BodyLen() // in bounds: verifyMeta checked the field
	probe.Release()
	switch {
	case bodyLen < 0:
		return nil, malformedf("message %d: body length %d", m.count+1, bodyLen)
	case bodyLen > m.body.remaining():
		return nil, tooLargef("Arrow message %d claims a body of %d bytes; %d are left of the %d-byte body limit",
			m.count+1, bodyLen, m.body.remaining(), m.body.max)
	}
	body, err := readBuffer(m.body, int(bodyLen), m.mem)
	if err != nil {
		return nil, m.readError("body", err)
	}
	m.last = ipc.NewMessage(meta, body) // retains both
	body.Release()
	m.count++
	return m.last, nil
}

// readError names what could not be read; a body that ends early is a
// truncated stream, anything else (the body limit, the client) is
// passed on.
func (m *bodyMessages) readError(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformedf("message %d: the stream ends inside its %s", m.count+1, what)
	}
	return err
}

// readBuffer reads n bytes into a buffer from mem. It grows the buffer as
// bytes arrive (from 64 KiB, doubling), so a length the body does not
// back costs at most about twice what was sent, not the length.
func readBuffer(r io.Reader, n int, mem memory.Allocator) (*memory.Buffer, error) {
	buf := memory.NewResizableBuffer(mem)
	for got := 0; got < n; {
		size := min(n, max(2*got, 64<<10))
		buf.Resize(size)
		k, err := io.ReadFull(r, buf.Bytes()[got:size])
		got += k
		if err != nil {
			buf.Release()
			return nil, err
		}
	}
	return buf, nil
}

// finish checks that nothing follows the end-of-stream marker: the body
// must be read to its end, and bytes after the stream are a client bug
// worth refusing rather than ignoring.
func (m *bodyMessages) finish() error {
	if !m.eos {
		return nil // ended at the end of the body
	}
	var one [1]byte
	switch _, err := io.ReadFull(m.body, one[:]); {
	case err == nil:
		m.err = malformedf("bytes follow the end-of-stream marker")
	case err != io.EOF:
		m.err = err
	}
	return m.err
}

func (m *bodyMessages) Retain() {}

// Release releases the last message read.
func (m *bodyMessages) Release() {
	if m.last != nil {
		m.last.Release()
		m.last = nil
	}
}

// badStream is an error that is the stream's fault: bad input, not a
// failure to read the body. msg is the whole InputError reason.
type badStream struct{ msg string }

func (e *badStream) Error() string { return e.msg }

// malformedf returns a badStream for a stream that breaks the format.
func malformedf(format string, args ...any) error {
	return &badStream{msg: "malformed Arrow IPC stream: " + fmt.Sprintf(format, args...)}
}

// refusedf returns a badStream for a well-formed stream this package
// does not take.
func refusedf(format string, args ...any) error {
	return &badStream{msg: fmt.Sprintf(format, args...)}
}
