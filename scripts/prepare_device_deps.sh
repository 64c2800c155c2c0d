#!/usr/bin/env bash
# Prepares, from scratch on this Debian 12 machine, what the GPU machine (Ubuntu 24.04 image, no FFmpeg -dev
# packages, no registry) needs for MP4 output and media input: a minimal FFmpeg 5.1 built here from Debian's
# source package — only what io/media_mp4 (H.264 through libx264 + native AAC into mp4, PNG frames) and
# io/media_reader (mov/mp4/wav/mp3/matroska demux, h264/aac/mp3/pcm/png/mjpeg decode, swscale, swresample)
# use — plus libx264 from Debian's libx264-dev/libx264-164 .debs, packed as .debs/ffmpeg-min.tar.xz
# (headers, shared libraries, relocatable .pc files). scripts/device_check.sh unpacks it and builds against it.
# FFmpeg's own assembly (swscale's RGB->YUV conversion, the AAC encoder's DSP) is built with nasm from Debian's
# nasm package, unpacked here like the other .debs (nothing installed system-wide), so the mux times measured on
# the GPU machine are what a user's distribution FFmpeg gives; libx264 from Debian carries its own assembly.
# The HTTP listener's library travels as .deb files (the harden branch adds them).
# Nothing of this is committed: .debs/ is ignored. Prints the size of what travels.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${H3_DEPS_WORK:-/tmp/h3-device-deps}
OUTDIR=.debs
mkdir -p "$WORK" "$OUTDIR"
PREFIX="$WORK/ffmpeg-min"
rm -rf "$PREFIX"

# ---- libx264 (headers + the shared library) from Debian's binary packages
(cd "$WORK" && rm -f libx264*.deb && apt-get download libx264-dev libx264-164 > /dev/null)
rm -rf "$WORK/x264" && mkdir -p "$WORK/x264"
for f in "$WORK"/libx264*.deb; do dpkg -x "$f" "$WORK/x264"; done
X264="$WORK/x264/usr"
sed -i "s#^prefix=.*#prefix=$X264#" "$X264"/lib/x86_64-linux-gnu/pkgconfig/x264.pc

# ---- nasm (FFmpeg's x86 assembler) from Debian's binary package, unpacked into the work folder
(cd "$WORK" && rm -f nasm_*.deb && apt-get download nasm > /dev/null)
rm -rf "$WORK/nasm" && dpkg -x "$WORK"/nasm_*.deb "$WORK/nasm"
NASM="$WORK/nasm/usr/bin/nasm"
"$NASM" -v > /dev/null

# ---- FFmpeg's Debian source package (a private deb-src list; the system's apt sources stay as they are)
APT="$WORK/apt"
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
printf 'deb-src http://deb.debian.org/debian bookworm main\ndeb-src http://deb.debian.org/debian-security bookworm-security main\n' > "$APT/sources.list"
APT_OPTS=(-o Dir::Etc::SourceList="$APT/sources.list" -o Dir::Etc::SourceParts=/nonexistent
          -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache")
if ! ls -d "$WORK"/ffmpeg-5.1*/ > /dev/null 2>&1; then
  apt-get "${APT_OPTS[@]}" update -q > /dev/null
  (cd "$WORK" && apt-get "${APT_OPTS[@]}" source -q ffmpeg > /dev/null)
fi
SRC=$(ls -d "$WORK"/ffmpeg-5.1*/ | head -1)
[ "${H3_DEPS_FETCH_ONLY:-0}" = 1 ] && { echo "prepare_device_deps: fetched $SRC"; exit 0; }

# ---- the minimal build
BUILD="$WORK/build"
rm -rf "$BUILD" && mkdir -p "$BUILD"
(cd "$BUILD" && PKG_CONFIG_PATH="$X264/lib/x86_64-linux-gnu/pkgconfig" "$SRC/configure" \
  --prefix="$PREFIX" --libdir="$PREFIX/lib" --enable-shared --disable-static --disable-programs --disable-doc \
  --disable-avdevice --disable-avfilter --disable-postproc --disable-network --disable-autodetect --x86asmexe="$NASM" \
  --disable-everything --enable-gpl --enable-libx264 --enable-zlib \
  --enable-encoder=libx264,aac,png --enable-decoder=h264,aac,mp3,mp3float,png,mjpeg,pcm_s16le,pcm_s24le,pcm_s32le,pcm_f32le,pcm_u8 \
  --enable-muxer=mp4,mov,wav --enable-demuxer=mov,wav,mp3,aac,matroska,image2 \
  --enable-parser=h264,aac,mpegaudio,png,mjpeg --enable-bsf=h264_mp4toannexb,aac_adtstoasc \
  --enable-protocol=file --enable-swscale --enable-swresample \
  --extra-cflags="-I$X264/include" --extra-ldflags="-L$X264/lib/x86_64-linux-gnu" > "$WORK/configure.log")
grep -q '^HAVE_X86ASM=yes' "$BUILD/ffbuild/config.mak" ||
  { echo "prepare_device_deps: FFmpeg's configure did not enable x86 assembly ($WORK/configure.log)" >&2; exit 1; }
nice -n 19 make -C "$BUILD" -j"$(nproc)" > "$WORK/make.log" 2>&1
make -C "$BUILD" install > /dev/null
cp -a "$X264"/lib/x86_64-linux-gnu/libx264.so* "$PREFIX/lib/"
cp -a "$X264"/include/x264*.h "$PREFIX/include/"
# relocatable .pc files: the prefix is where the .pc file lies, one folder up twice
for pc in "$PREFIX"/lib/pkgconfig/*.pc; do
  sed -i 's#^prefix=.*#prefix=${pcfiledir}/../..#; s#^libdir=.*#libdir=${prefix}/lib#; s#^includedir=.*#includedir=${prefix}/include#' "$pc"
done
strip --strip-unneeded "$PREFIX"/lib/*.so.*.* 2>/dev/null || true
tar -C "$WORK" -cJf "$OUTDIR/ffmpeg-min.tar.xz" ffmpeg-min
echo "prepare_device_deps: $(du -sh "$PREFIX" | cut -f1) unpacked, carried $(du -h "$OUTDIR/ffmpeg-min.tar.xz" | cut -f1) ($OUTDIR/ffmpeg-min.tar.xz)"
ls -la "$PREFIX/lib" | grep '\.so\.' | awk '{print $5, $9}'
