package wal

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Scan's search for a valid entry after damage tries every byte offset,
// and a candidate's length can be anything up to EntryPayloadMax: checking
// each candidate's CRC directly would cost O(length) per candidate, which
// is quadratic over a torn tail of random-looking bytes (a compressed
// Arrow stream torn mid-write: seconds per MiB). crcIndex answers the
// CRC-32C of any window b[i:j] in time independent of its length, from
// checkpoints of the running CRC and the combination rule
//
//	crc(A‖B) = crc(A)·x^(8|B|) mod P  ⊕  crc(B)
//
// (zlib's crc32_combine), solved for crc(B).
type crcIndex struct {
	b    []byte
	from int
	// cps[k] is the CRC-32C of b[from : from+k*crcStride]; grown on demand.
	cps []uint32
}

// crcStride trades the index's memory (4 bytes per stride) for the bytes
// hashed per query (at most two strides).
const crcStride = 512

// castagnoliReflected is the CRC-32C polynomial in the reflected bit order
// hash/crc32 uses (the coefficient of x^0 is the top bit).
const castagnoliReflected = 0x82F63B78

// x2n[k] is x^(2^k) mod P.
var x2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// multModP returns a·b mod P.
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) mod P: the effect of n bytes on a CRC.
func xPow8n(n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(x2n[k&31], p)
		}
	}
	return p
}

// prefix returns the CRC-32C of b[from:i]. REQUIRES: from ≤ i ≤ len(b).
func (x *crcIndex) prefix(i int) uint32 {
	if len(x.cps) == 0 {
		x.cps = append(x.cps, 0)
	}
	k := (i - x.from) / crcStride
	for len(x.cps) <= k {
		n := len(x.cps)
		at := x.from + (n-1)*crcStride
		x.cps = append(x.cps, crc32.Update(x.cps[n-1], castagnoli, x.b[at:at+crcStride]))
	}
	at := x.from + k*crcStride
	return crc32.Update(x.cps[k], castagnoli, x.b[at:i])
}

// window returns the CRC-32C of b[i:j]. REQUIRES: from ≤ i ≤ j ≤ len(b).
func (x *crcIndex) window(i, j int) uint32 {
	if j-i <= 2*crcStride {
		return crc32.Checksum(x.b[i:j], castagnoli)
	}
	return x.prefix(j) ^ multModP(x.prefix(i), xPow8n(j-i))
}
