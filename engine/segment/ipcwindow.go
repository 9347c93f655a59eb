package segment

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// windowMessages reads the Arrow IPC messages of one PART's stream
// straight out of its window: each message's metadata and body are
// sub-slices of the window, so decoding a slice copies no data (arrow-go's
// own message reader allocates and copies every body). The window comes
// from a verified body and the decoded arrays keep it alive; nothing
// writes to it.
//
// Framing, as the IPC stream format has it:
//
//	u32 0xFFFFFFFF | i32 metadata_len | metadata (flatbuffer, padded) | body
//	…
//	u32 0xFFFFFFFF | i32 0                                  end of stream
//
// Every length is checked against the bytes left in the window before it
// is used.
type windowMessages struct {
	b    []byte
	off  int
	last *ipc.Message // released when the next message is read
}

const ipcContinuation = 0xFFFFFFFF

var noBody = memory.NewBufferBytes(nil)

func (m *windowMessages) Message() (*ipc.Message, error) {
	if m.last != nil {
		m.last.Release()
		m.last = nil
	}
	if len(m.b)-m.off < 8 || binary.LittleEndian.Uint32(m.b[m.off:]) != ipcContinuation {
		return nil, fmt.Errorf("segment: arrow message at %d: no continuation marker", m.off)
	}
	metaLen := int64(int32(binary.LittleEndian.Uint32(m.b[m.off+4:])))
	m.off += 8
	if metaLen == 0 {
		return nil, io.EOF
	}
	if metaLen < 4 || metaLen > int64(len(m.b)-m.off) {
		return nil, fmt.Errorf("segment: arrow message at %d: metadata of %d bytes, %d left", m.off, metaLen, len(m.b)-m.off)
	}
	meta := memory.NewBufferBytes(m.b[m.off : m.off+int(metaLen)])
	m.off += int(metaLen)
	probe := ipc.NewMessage(meta, noBody)
	bodyLen := probe.BodyLen()
	probe.Release()
	if bodyLen < 0 || bodyLen > int64(len(m.b)-m.off) {
		return nil, fmt.Errorf("segment: arrow message at %d: body of %d bytes, %d left", m.off, bodyLen, len(m.b)-m.off)
	}
	body := memory.NewBufferBytes(m.b[m.off : m.off+int(bodyLen)])
	m.off += int(bodyLen)
	m.last = ipc.NewMessage(meta, body)
	return m.last, nil
}

// rest is how many bytes follow the last message read.
func (m *windowMessages) rest() int { return len(m.b) - m.off }

func (m *windowMessages) Retain() {}

func (m *windowMessages) Release() {
	if m.last != nil {
		m.last.Release()
		m.last = nil
	}
}
