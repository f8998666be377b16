// One video, centred on black and fitted to the stage: QtMultimedia's MediaPlayer (the
// platform's decoder: FFmpeg, or GStreamer on a Pi with hardware decoders) and its
// VideoOutput, drawn by the scene like any other layer. Python (videolayer.py) loads it paused
// on its first frame, plays it when it is due and counts its frames; an ended video keeps its
// last frame.
import QtQuick
import QtMultimedia

Item {
    id: video

    // Its fade (Fade.qml), started and ended by its region's layer stack (layerstack.py).
    readonly property QtObject fade: fader
    // Loaded, played and counted by Python (videoplayer.py).
    readonly property QtObject player: mediaPlayer

    // [screen] audio: with it off, no audio output at all (the track is not even decoded).
    property bool audio: true

    anchors.fill: parent
    visible: false

    Bars { inner: output.contentRect }
    VideoOutput {
        id: output
        anchors.fill: parent
        fillMode: VideoOutput.PreserveAspectFit
        endOfStreamPolicy: VideoOutput.KeepLastFrame
    }
    AudioOutput { id: sound }
    MediaPlayer {
        id: mediaPlayer
        videoOutput: output
        audioOutput: video.audio ? sound : null
    }
    Fade { id: fader; target: video }
}
