package serpent

// sboxes are the eight 4-bit S-boxes of the Serpent specification (S0..S7,
// as printed in the AES submission). Round i uses S[i mod 8]; the key
// schedule uses S[(3-i) mod 8] for round key i. The round functions in
// rounds.go apply them bitsliced, as boolean circuits that gen_test.go
// derives from this table.
var sboxes = [8][16]uint8{
	{3, 8, 15, 1, 10, 6, 5, 11, 14, 13, 4, 2, 7, 0, 9, 12},
	{15, 12, 2, 7, 9, 0, 5, 10, 1, 11, 14, 8, 6, 13, 3, 4},
	{8, 6, 7, 9, 3, 12, 10, 15, 13, 1, 14, 4, 0, 11, 5, 2},
	{0, 15, 11, 8, 12, 9, 6, 3, 13, 1, 2, 4, 10, 7, 5, 14},
	{1, 15, 8, 3, 12, 0, 11, 6, 2, 5, 4, 10, 9, 14, 7, 13},
	{15, 5, 2, 11, 4, 10, 9, 12, 0, 3, 14, 8, 13, 6, 7, 1},
	{7, 2, 12, 5, 8, 4, 6, 11, 14, 9, 1, 15, 13, 3, 10, 0},
	{1, 13, 15, 0, 14, 8, 2, 11, 7, 4, 12, 10, 9, 3, 5, 6},
}

// inverse returns the inverse of S-box s.
func inverse(s [16]uint8) [16]uint8 {
	var inv [16]uint8
	for x, y := range s {
		inv[y] = uint8(x)
	}
	return inv
}
