// The last frame of a web view, kept on the GPU (a texture copy, nothing read back) while the
// next item loads in its place: the low-memory profile's one view (kiosk.py).
import QtQuick

ShaderEffectSource {
    id: still

    anchors.fill: parent
    live: false
    hideSource: false
    visible: false

    Fade { target: still }
}
